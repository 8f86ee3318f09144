"""The steps of a run by key, the role that owns each kind, and the queue it runs on.

A key is a kind, optionally with what it works on: "engineer:T1" is the engineer's step for plan task T1.
"""
from __future__ import annotations

PO_TRIAGE = "po_triage"  # a ticket's first step: its kind picks the playbook (a brief has none)
REPO_PREPARE = "repo_prepare"  # an existing repository: branch from the base, build its environment, baseline its tests
PO_CLARIFY = "po_clarify"
BA_STORIES = "ba_stories"
ARCHITECT = "architect_spec"
DESIGN_REVIEW = "tl_design_review"
LOCALIZE = "tl_localize"  # an existing repository: the files and symbols to change, picked from its map
PLAN = "tl_plan"
ENGINEER = "engineer"  # one step per plan task: "engineer:T1"
FIX = "engineer_fix"
SELF_TEST = "self_test"
CODE_REVIEW = "tl_code_review"
QC_TESTS = "qc_tests"
QC_RUN = "qc_run"
DEVOPS = "devops"
DELIVER = "deliver"
ROLE_OF_STEP = {
    PO_TRIAGE: "product_owner", REPO_PREPARE: "sandbox", LOCALIZE: "tech_lead", PO_CLARIFY: "product_owner",
    BA_STORIES: "business_analyst", ARCHITECT: "tech_architect",
    DESIGN_REVIEW: "tech_lead", PLAN: "tech_lead", ENGINEER: "senior_engineer", FIX: "senior_engineer",
    SELF_TEST: "sandbox", CODE_REVIEW: "tech_lead", QC_TESTS: "qc_engineer", QC_RUN: "sandbox",
    DEVOPS: "devops_engineer", DELIVER: "delivery",
}
SANDBOX_STEPS = {REPO_PREPARE, SELF_TEST, QC_RUN}
DEFAULT_QUEUE_STEPS = {DELIVER}


def first_step(*, ticket: bool, repository: bool) -> str:
    """A ticket is triaged first; a brief on an existing repository prepares it (docs/adr/0035); any other brief
    goes straight to clarification (its playbook came with it)."""
    return PO_TRIAGE if ticket else REPO_PREPARE if repository else PO_CLARIFY


def after_triage(*, repository: bool) -> str:
    """A triaged ticket on an existing repository prepares it before clarification; elsewhere it is clarified."""
    return REPO_PREPARE if repository else PO_CLARIFY


def before_plan(*, on_repository: bool) -> str:
    """On an existing repository the Tech Lead first localizes the change, then plans; elsewhere it plans."""
    return LOCALIZE if on_repository else PLAN


def kind_of(key: str) -> str:
    """The step's kind: "engineer:T1" → "engineer"."""
    return key.split(":", 1)[0]


def queue_for(key: str) -> str:
    """sandbox steps on `sandbox` (CPU bound), delivery on `default`, model calls on `llm`."""
    kind = kind_of(key)
    return "sandbox" if kind in SANDBOX_STEPS else "default" if kind in DEFAULT_QUEUE_STEPS else "llm"
