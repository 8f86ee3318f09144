"""The Requirement and its lifecycle graph (DESIGN.md's table, one @transition per row).

Transition methods hold guards only; services call them, save, and write the audit row.
"""
import uuid

from django.conf import settings
from django.db import models
from django_fsm import GET_STATE, FSMField, FSMModelMixin, transition

from lifecycle import guards, playbooks
from lifecycle.states import BUDGET_STATES, NON_TERMINAL_STATES
from lifecycle.states import RequirementState as S
from lifecycle.tickets import TicketSource

OUTCOME_SETTINGS = ("budgets", "quality_gates", "playbooks")  # the project settings a run's transitions depend on


class Requirement(FSMModelMixin, models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey("lifecycle.Organization", on_delete=models.CASCADE, related_name="requirements")
    project = models.ForeignKey("lifecycle.Project", on_delete=models.CASCADE, related_name="requirements")
    title = models.CharField(max_length=200, blank=True)
    brief = models.TextField()
    state = FSMField(default=S.RECEIVED, choices=S.choices, protected=True, db_index=True)
    playbook = models.CharField(max_length=40, default=playbooks.DEFAULT, choices=playbooks.CHOICES,
                                help_text="the phases it goes through (lifecycle/playbooks.py), chosen at submission")
    prompt_bundle = models.ForeignKey("lifecycle.PromptBundle", null=True, blank=True, on_delete=models.PROTECT,
                                      help_text="the prompts this requirement runs with, fixed at submission")
    run_settings = models.JSONField(
        null=True, blank=True,
        help_text="the project's settings that decide outcomes (budgets, quality gates), fixed at submission and "
                  "copied to replays; empty: the project's current settings")
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="replays",
                                  help_text="the run this one replays from its recordings")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    clarifications = models.JSONField(default=list, blank=True, help_text="questions asked and answers given")
    clarification_round = models.PositiveIntegerField(default=1)
    story_round = models.PositiveIntegerField(default=0)
    design_round = models.PositiveIntegerField(default=0)
    dev_attempts = models.PositiveIntegerField(default=0)
    code_review_round = models.PositiveIntegerField(default=0)
    budget_exhausted = models.BooleanField(default=False)
    budget_paused_from = models.CharField(max_length=40, blank=True,
                                          help_text="the state a budget ran out in: where the budget gate resumes it")
    budget_overrides = models.JSONField(default=dict, blank=True,
                                        help_text="limits set by budget decisions, over the project's and playbook's")
    injected_constraints = models.JSONField(default=list, blank=True,
                                            help_text="constraints reviewers injected: in every later agent context")
    # "" : no apply has committed yet; NULL: not known (a requirement from before migration 0014)
    base_sha = models.CharField(max_length=40, blank=True, default="", editable=False, help_text=(
        "on an existing repository: the base branch's commit the run branched from, recorded by its first "
        "repository step; empty: a new project's history starts empty"))
    workspace_head = models.CharField(max_length=40, null=True, blank=True, default="", db_default="",  # noqa: DJ001
                                      help_text="the workspace commit the last committed apply made; an apply whose "
                                                "transaction failed after its git commit is reset to it")
    # The ticket it came from, if any (its title is the requirement's title, its body the brief): lifecycle/tickets.py
    ticket_source = models.CharField(max_length=10, choices=TicketSource.choices, blank=True, editable=False,
                                     help_text="where the ticket came from; empty: a brief, not a ticket")
    ticket_key = models.CharField(max_length=100, blank=True, editable=False, help_text="e.g. #42 or PROJ-7")
    ticket_url = models.URLField(max_length=500, blank=True, editable=False)
    ticket_repository_id = models.CharField(
        max_length=20, blank=True, default="", editable=False,
        help_text="GitLab: the numeric id of the issue's project, as the signed webhook said (a project its settings "
                  "name by id knows its own issues by it)")
    branch = models.CharField(
        max_length=255, blank=True, editable=False,
        help_text="the git branch its work goes on: named when first needed, then kept "
                  "(lifecycle/services/repositories.py)")
    ticket_via_webhook = models.BooleanField(
        default=False, editable=False,
        help_text="the ticket came in a delivery signed with the project's webhook secret: only such a ticket is "
                  "commented on, closed by its change, and one run with the tracker's other deliveries of it")
    created_at = models.DateTimeField(auto_now_add=True)
    state_changed_at = models.DateTimeField(auto_now_add=True)  # and set by every transition (services.transitions)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organization", "-created_at"])]
        constraints = [
            # a ticket delivered twice at once (a webhook and its retry, a label and a /aiteam comment) makes one
            # run: the second INSERT waits for the first's transaction, then fails here; a finished run frees it
            models.UniqueConstraint(fields=["project", "ticket_source", "ticket_key", "ticket_via_webhook"],
                                    condition=models.Q(ticket_key__gt="", state__in=NON_TERMINAL_STATES),
                                    name="one_live_requirement_per_ticket"),
        ]

    def __str__(self) -> str:
        return self.title or self.brief[:60]

    @property
    def outcome_settings(self) -> dict:
        """Budgets and quality gates as they were at submission (see run_settings), else the project's now."""
        return self.run_settings if self.run_settings is not None else (self.project.settings or {})

    # --- clarification -------------------------------------------------------------
    @transition(state, source=S.RECEIVED, target=S.CLARIFIED, conditions=[guards.has_requirement_doc])
    def clarify(self) -> None: ...

    @transition(state, source=S.RECEIVED, target=S.BLOCKED, conditions=[guards.has_open_clarification])
    def block(self) -> None: ...

    @transition(state, source=S.BLOCKED, target=S.RECEIVED, conditions=[guards.clarification_answered])
    def answer(self) -> None: ...

    @transition(state, source=S.CLARIFIED, target=S.RECEIVED)
    def request_clarification(self) -> None: ...

    # A reviewer overrides the triage (or a brief's playbook): back to received, where the Product Owner clarifies
    # again under the new playbook. Not once design or planning has started (ADR 0034).
    @transition(state, source=[S.RECEIVED, S.BLOCKED, S.CLARIFIED, S.USER_STORIES_CREATED], target=S.RECEIVED,
                conditions=[guards.playbook_still_open])
    def retriage(self) -> None: ...

    # --- stories -------------------------------------------------------------------
    # The story edges exist only in playbooks that write stories (new_feature).
    @transition(state, source=S.CLARIFIED, target=S.USER_STORIES_CREATED,
                conditions=[guards.playbook_writes_stories, guards.has_draft_stories])
    def create_stories(self) -> None: ...

    @transition(state, source=S.USER_STORIES_CREATED, target=S.CLARIFIED,
                conditions=[guards.playbook_writes_stories, guards.stories_rejected])
    def reject_stories(self) -> None: ...

    @transition(
        state, source=S.USER_STORIES_CREATED, target=S.DESIGN_READY,
        conditions=[guards.playbook_writes_stories, guards.stories_approved_by_human, guards.has_approved_spec],
    )
    def approve_design(self) -> None: ...

    # A playbook without stories (bug_fix): the clarified ticket, with acceptance criteria, is ready to plan.
    @transition(state, source=S.CLARIFIED, target=S.DESIGN_READY,
                conditions=[guards.playbook_skips_stories, guards.ticket_ready])
    def accept_ticket(self) -> None: ...

    # --- design and development ----------------------------------------------------
    @transition(state, source=S.DESIGN_READY, target=S.USER_STORIES_CREATED, conditions=[guards.playbook_writes_stories])
    def reopen_stories(self) -> None: ...

    @transition(state, source=S.DESIGN_READY, target=S.IN_DEVELOPMENT, conditions=[guards.has_implementation_plan])
    def start_development(self) -> None: ...

    @transition(state, source=S.IN_DEVELOPMENT, target=S.IN_REVIEW, conditions=[guards.self_tests_passing])
    def submit_for_review(self) -> None: ...

    @transition(state, source=S.IN_DEVELOPMENT, target=S.IN_DEVELOPMENT, conditions=[guards.attempts_left])
    def retry_development(self) -> None: ...

    @transition(state, source=S.IN_DEVELOPMENT, target=S.ESCALATED, conditions=[guards.escalation_due])
    def escalate(self) -> None: ...

    @transition(state, source=S.ESCALATED, target=S.IN_DEVELOPMENT, conditions=[guards.escalation_resolved])
    def resume_development(self) -> None: ...

    # --- the budget gate: from any working state to escalated, and back to exactly that state ---
    @transition(state, source=BUDGET_STATES, target=S.ESCALATED, conditions=[guards.budget_is_exhausted])
    def exhaust_budget(self) -> None: ...

    @transition(state, source=S.ESCALATED, target=GET_STATE(lambda req: req.budget_paused_from, states=BUDGET_STATES),
                conditions=[guards.budget_decided])
    def resume_budget(self) -> None: ...

    # --- review, QC, deployment ----------------------------------------------------
    @transition(state, source=S.IN_REVIEW, target=S.TEST_PENDING)
    def pass_code_review(self) -> None: ...

    @transition(state, source=S.IN_REVIEW, target=S.IN_DEVELOPMENT)
    def fail_code_review(self) -> None: ...

    @transition(state, source=S.TEST_PENDING, target=S.READY_TO_DEPLOY)
    def pass_quality_gate(self) -> None: ...

    @transition(state, source=S.TEST_PENDING, target=S.IN_DEVELOPMENT)
    def fail_quality_gate(self) -> None: ...

    @transition(
        state, source=S.READY_TO_DEPLOY, target=S.DEPLOYED,
        conditions=[guards.deployment_approved_by_human, guards.delivery_succeeded],
    )
    def deploy(self) -> None: ...

    @transition(state, source=S.READY_TO_DEPLOY, target=S.TEST_PENDING)
    def reject_deployment(self) -> None: ...

    @transition(state, source=NON_TERMINAL_STATES, target=S.CANCELLED)
    def cancel(self) -> None: ...


class RequirementDoc(models.Model):
    """The PO's clarified requirement; a new version per clarification round, none overwritten."""

    requirement = models.ForeignKey(Requirement, on_delete=models.CASCADE, related_name="docs")
    version = models.PositiveIntegerField()
    summary = models.TextField()
    objectives = models.JSONField(default=list)
    out_of_scope = models.JSONField(default=list)
    assumptions = models.JSONField(default=list)
    constraints = models.JSONField(default=list)
    success_metrics = models.JSONField(default=list)
    acceptance_criteria = models.JSONField(default=list, blank=True,
                                           help_text="expected behaviour: what a bug fix is planned and tested from")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]
        constraints = [models.UniqueConstraint(fields=["requirement", "version"], name="one_doc_per_version")]
