"""The shared secret a project names for one source's webhook, read from the worker's environment.

Checked again on every delivery, not only when the project was saved: the operator may have taken the variable
off AITEAM_WEBHOOK_SECRET_ENVS or never set it, and another organization may have come to name it since. The
value is returned to the verifier only; reasons name the variable, never its value.
"""
from __future__ import annotations

import os

from django.conf import settings

from lifecycle.models import Project
from lifecycle.selectors import secret_env_shared


def webhook_secret(project: Project | None, source: str) -> tuple[str, str]:
    """(the secret, "") or ("", why there is none) for `source`'s webhook of `project`."""
    if project is None:
        return "", "no such project"
    env = project.webhook_secret_env(source)
    if not env:
        return "", f"the project's {source} webhook is off (no secret variable named)"
    if env not in settings.AITEAM_WEBHOOK_SECRET_ENVS:
        return "", f"{env} is no longer on the operator's AITEAM_WEBHOOK_SECRET_ENVS"
    if not os.environ.get(env):
        return "", f"{env} is not set in the server's environment"
    if secret_env_shared(env, project):
        return "", f"{env} is named by another organization's project too"
    return os.environ[env], ""
