"""State and kind vocabularies, shared by models, services, API and admin."""
from django.db import models


class RequirementState(models.TextChoices):
    RECEIVED = "received"
    CLARIFIED = "clarified"
    USER_STORIES_CREATED = "user_stories_created"
    DESIGN_READY = "design_ready"
    IN_DEVELOPMENT = "in_development"
    IN_REVIEW = "in_review"
    TEST_PENDING = "test_pending"
    READY_TO_DEPLOY = "ready_to_deploy"
    DEPLOYED = "deployed"
    BLOCKED = "blocked"
    ESCALATED = "escalated"
    CANCELLED = "cancelled"


TERMINAL_STATES = (RequirementState.DEPLOYED, RequirementState.CANCELLED)
NON_TERMINAL_STATES = [s for s in RequirementState.values if s not in TERMINAL_STATES]
# Where steps run, so where a budget can run out: exhaust_budget → escalated, resume_budget → the same state.
BUDGET_STATES = [RequirementState.RECEIVED, RequirementState.CLARIFIED, RequirementState.USER_STORIES_CREATED,
                 RequirementState.DESIGN_READY, RequirementState.IN_DEVELOPMENT, RequirementState.IN_REVIEW,
                 RequirementState.TEST_PENDING, RequirementState.READY_TO_DEPLOY]


class StoryState(models.TextChoices):
    DRAFT = "draft"
    APPROVED = "approved"
    REJECTED = "rejected"
    IN_PROGRESS = "in_progress"
    DONE = "done"


class ReviewState(models.TextChoices):
    OPEN = "open"
    CLAIMED = "claimed"
    ESCALATED = "escalated"
    RESOLVED = "resolved"
    EXPIRED = "expired"


PENDING_REVIEW_STATES = (ReviewState.OPEN, ReviewState.CLAIMED, ReviewState.ESCALATED)


class ReviewKind(models.TextChoices):
    CLARIFICATION = "clarification"
    STORIES_APPROVAL = "stories_approval"
    ESCALATION = "escalation"
    STEP_FAILED = "step_failed"
    DESIGN_REVIEW = "design_review"
    CODE_REVIEW = "code_review"
    DEPLOYMENT_APPROVAL = "deployment_approval"
    BUDGET_EXHAUSTED = "budget_exhausted"


class Decision(models.TextChoices):
    APPROVE = "approve"
    REJECT = "reject"
    REQUEST_CHANGES = "request_changes"
    ANSWER = "answer"
    OVERRIDE_BUDGET = "override_budget"  # budget gate: new limits (approve = partial output, reject = terminate)
    INJECT_CONSTRAINT = "inject_constraint"  # budget gate: a constraint for every later step, then continue


class Role(models.TextChoices):
    SUBMITTER = "submitter"
    REVIEWER = "reviewer"
    ADMIN = "admin"


DECIDING_ROLES = (Role.REVIEWER, Role.ADMIN)
# decided_by_policy of a task the SLA sweep decided at its limit (others: "pre-authorized", "autonomous", "replay"…)
SLA_POLICY_ROLE = "sla_policy"
SUBMITTING_ROLES = (Role.SUBMITTER, Role.ADMIN)


class StepState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


class ArtifactKind(models.TextChoices):
    TECHNICAL_SPEC = "technical_spec"
    ADR = "adr"
    IMPLEMENTATION_PLAN = "implementation_plan"
    SOURCE_FILE = "source_file"
    TEST_FILE = "test_file"
    TEST_REPORT = "test_report"
    REVIEW = "review"
    CI_CONFIG = "ci_config"
    RUNBOOK = "runbook"
    DIFF_SUMMARY = "diff_summary"
    DELIVERY = "delivery"
    ACCEPTANCE_COVERAGE = "acceptance_coverage"
    STATUS_DIGEST = "status_digest"
    BASELINE = "baseline"  # an existing repository's tests at the base commit, twice (docs/adr/0035)
    LOCALIZATION = "localization"  # the files and symbols the Tech Lead chose to change, with reasons
    SCOPE = "scope"  # the change measured from the merge base, against the project's limits


# Kinds the SLA policy never decides: at its limit it escalates the task, which waits for a person. Nobody reviewing
# a deployment is no reason to rewrite the code, and nothing is deployed without a person anyway (docs/operations.md).
NEVER_DECIDED_BY_SLA = (ReviewKind.DEPLOYMENT_APPROVAL,)

# The decisions a review task of each kind offers.
REVIEW_OPTIONS = {
    ReviewKind.CLARIFICATION: [Decision.ANSWER, Decision.REJECT],
    ReviewKind.STORIES_APPROVAL: [Decision.APPROVE, Decision.REJECT, Decision.REQUEST_CHANGES],
    ReviewKind.ESCALATION: [Decision.REQUEST_CHANGES, Decision.REJECT],
    ReviewKind.STEP_FAILED: [Decision.APPROVE, Decision.REJECT],
    ReviewKind.DESIGN_REVIEW: [Decision.APPROVE, Decision.REQUEST_CHANGES, Decision.REJECT],
    ReviewKind.CODE_REVIEW: [Decision.APPROVE, Decision.REQUEST_CHANGES, Decision.REJECT],
    ReviewKind.DEPLOYMENT_APPROVAL: [Decision.APPROVE, Decision.REJECT],
    # approve = approve the partial output (offered only where there is one), reject = terminate
    ReviewKind.BUDGET_EXHAUSTED: [Decision.OVERRIDE_BUDGET, Decision.INJECT_CONSTRAINT, Decision.APPROVE, Decision.REJECT],
}
