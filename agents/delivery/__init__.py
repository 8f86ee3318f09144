"""Delivery: push an approved branch to the project's git remote and, where configured, open its pull request.

Pure Python (no Django): the caller builds a DeliveryPlan from the project's settings and stores
``DeliveryResult.to_dict()`` as the delivery's record.
"""
from agents.delivery.credentials import HostAuth
from agents.delivery.errors import DeliveryError, strip_credentials
from agents.delivery.git_remote import ensure_bare_remote
from agents.delivery.github import GitHubClient, GitHubSettings
from agents.delivery.remotes import Remote, RemoteRefused, remote_refusal
from agents.delivery.saga import CompensationRecord, DeliveryPlan, DeliveryResult, deliver

__all__ = [
    "ensure_bare_remote",
    "CompensationRecord", "DeliveryError", "DeliveryPlan", "DeliveryResult", "GitHubClient", "GitHubSettings", "HostAuth",
    "Remote", "RemoteRefused", "deliver", "remote_refusal", "strip_credentials",
]
