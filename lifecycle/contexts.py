"""Agent contexts, built from the database (through the translators where a shape changes).

Each function takes ids and returns the pydantic context one agent step needs; the agent
itself never sees a model instance.
"""
from __future__ import annotations

from agents import translators
from agents.edits import read_files
from agents.runner_reach import is_test_file
from agents.schemas import (
    AcceptanceCriterion,
    ArchitectContext,
    BugTicketContext,
    BusinessAnalystContext,
    CodeReviewContext,
    DesignReviewContext,
    DevOpsContext,
    EngineerContext,
    FixContext,
    LocalizeContext,
    PlanContext,
    PlannedTask,
    ProductOwnerContext,
    QCContext,
    RepoCodeReviewContext,
    RepoEngineerContext,
    RepoFixContext,
    RepoPlanContext,
    RepoQCContext,
    RepoTicketPlanContext,
    RequirementDocView,
    StoryFeedback,
    StoryOut,
    TechnicalSpecOutput,
    Ticket,
    TicketPlanContext,
    TicketPlanOutput,
    TriageContext,
)
from agents.schemas.engineering import engineer_may_not_write
from lifecycle import repo_contexts as repo
from lifecycle import step_keys
from lifecycle.models import Requirement
from lifecycle.playbooks import playbook_named
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.development import workspace_files
from lifecycle.states import ArtifactKind, Decision, ReviewKind, ReviewState, StoryState

TEST_COMMAND = "python -m pytest -q"
TESTS_NOT_RUN = "AcceptanceTestsNotRun"  # the events by which the gate hands QC's tests back (gate_routing)
NOT_REPRODUCED = "ReproductionsPassAtBase"
STORY_FIELDS = ["title", "as_a", "i_want", "so_that", "acceptance_criteria", "priority", "story_points"]


def approved_stories(req: Requirement) -> list[StoryOut]:
    rows = req.stories.filter(round=req.story_round, state__in=[StoryState.APPROVED, StoryState.IN_PROGRESS,
                                                                 StoryState.DONE]).values(*STORY_FIELDS)
    return [StoryOut(**row) for row in rows]


def spec_of(req: Requirement) -> TechnicalSpecOutput:
    spec = latest(req, ArtifactKind.TECHNICAL_SPEC, "technical_spec")
    adrs = req.artifacts.filter(kind=ArtifactKind.ADR, metadata__round=spec.metadata["round"]).select_related("blob")
    return TechnicalSpecOutput(**content_json(spec), adrs=[content_json(a) for a in adrs])


def from_ticket(req: Requirement) -> bool:
    """The playbook skips stories and design (bug_fix): later agents work from the clarified ticket."""
    return not playbook_named(req.playbook).writes_stories


def ticket_of(req: Requirement) -> Ticket:
    doc = req.docs.order_by("-version").first()
    return Ticket(title=req.title, summary=doc.summary, objectives=doc.objectives, constraints=doc.constraints,
                  acceptance_criteria=doc.acceptance_criteria)


def ticket_plan_of(req: Requirement) -> TicketPlanOutput:
    """The Tech Lead's plan of a bug fix: it names the interfaces and tech stack a spec would have."""
    return TicketPlanOutput(**content_json(latest(req, ArtifactKind.IMPLEMENTATION_PLAN, "plan")))


def acceptance_criteria_of(req: Requirement) -> list[AcceptanceCriterion]:
    """What QC must cover and the reviewer checks: the approved stories' criteria, or the ticket's."""
    if from_ticket(req):
        return translators.ticket_to_criteria(ticket_of(req))
    return translators.stories_to_criteria(approved_stories(req))


def triage_context(requirement_id) -> TriageContext:
    """The ticket as it came in: the Product Owner triages it before anything else is decided."""
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    return TriageContext(title=req.title, body=req.brief, source=req.ticket_source, key=req.ticket_key,
                         project=req.project.name)


def product_owner_context(requirement_id) -> ProductOwnerContext:
    """A brief, or (in a playbook without stories) a bug ticket: the context's type picks the PO's job."""
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    context = ProductOwnerContext if playbook_named(req.playbook).writes_stories else BugTicketContext
    return context(title=req.title, brief=req.brief, project=req.project.name, clarifications=req.clarifications)


def business_analyst_context(requirement_id, round: int) -> BusinessAnalystContext:
    req = Requirement.objects.get(pk=requirement_id)
    doc = req.docs.order_by("-version").first()
    view = RequirementDocView(
        summary=doc.summary, objectives=doc.objectives, out_of_scope=doc.out_of_scope,
        assumptions=doc.assumptions, constraints=doc.constraints, success_metrics=doc.success_metrics,
    )
    return BusinessAnalystContext(title=req.title, brief=req.brief, doc=view, round=round, feedback=_story_feedback(req))


def _story_feedback(req: Requirement) -> list[StoryFeedback]:
    """Every earlier send-back, oldest first, so the BA reworks with all of it."""
    sent_back = req.review_tasks.filter(
        kind__in=[ReviewKind.STORIES_APPROVAL, ReviewKind.ESCALATION], state=ReviewState.RESOLVED,
        decision__in=[Decision.REJECT, Decision.REQUEST_CHANGES],
    ).order_by("created_at")
    titles = {}
    for story in req.stories.only("round", "title"):
        titles.setdefault(story.round, []).append(story.title)
    return [
        StoryFeedback(round=t.round, decision=t.decision, text=t.sent_back_text, story_titles=titles.get(t.round, []))
        for t in sent_back
    ]


def architect_context(requirement_id, round: int) -> ArchitectContext:
    req = Requirement.objects.get(pk=requirement_id)
    doc = req.docs.order_by("-version").first()
    return ArchitectContext(
        title=req.title, summary=doc.summary, constraints=doc.constraints, round=round,
        requirements=translators.stories_to_requirements(approved_stories(req)), review_notes=_design_notes(req),
    )


def design_review_context(requirement_id, round: int) -> DesignReviewContext:
    req = Requirement.objects.get(pk=requirement_id)
    return DesignReviewContext(requirements=translators.stories_to_requirements(approved_stories(req)),
                               spec=spec_of(req), round=round)


def plan_context(requirement_id) -> PlanContext | TicketPlanContext:
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    if from_ticket(req):
        context = TicketPlanContext(ticket=ticket_of(req))
    else:
        context = translators.spec_to_plan_context(spec_of(req), approved_stories(req))
    return _repo_plan_context(req, context) if req.base_sha else context


def localize_context(requirement_id) -> LocalizeContext:
    """The clarified ticket, the search hits for its words and the repository map ranked towards it, within the
    Tech Lead's budget; the answer is checked against the index of the same commit."""
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    ticket = repo_ticket(req)
    with repo.checkout(req.pk) as workspace:
        head = workspace.head()
    index = repo.repository_index(req, workspace, head)  # from git's objects: no lock needed while it indexes
    # the brief too: a pasted traceback names files and functions the clarified summary may leave out
    query = "\n".join([ticket.title, ticket.summary, *ticket.objectives, *ticket.acceptance_criteria, req.brief])
    context = LocalizeContext(ticket=ticket, repository_map="", workspace=str(workspace.path), **repo.index_facts(index))
    return repo.localize_fitted(context, index, query, repo.budget_for(req.project, "tech_lead"))


def repo_ticket(req: Requirement) -> Ticket:
    """The ticket as the repository roles see it: the clarified ticket, or for a brief with stories the requirement
    document with the stories' criteria."""
    doc = req.docs.order_by("-version").first()
    return Ticket(title=req.title, summary=doc.summary, objectives=doc.objectives, constraints=doc.constraints,
                  acceptance_criteria=[c.criterion for c in acceptance_criteria_of(req)])


def _repo_plan_context(req: Requirement, plan: PlanContext | TicketPlanContext
                       ) -> RepoPlanContext | RepoTicketPlanContext:
    """On a repository the plan also sees the localization and its files as they stand, within the Tech Lead's
    budget; the context stays a kind of its own, so the same planner takes it."""
    localization = repo.localization_of(req)
    wanted = repo.localized(localization)
    budget = repo.budget_for(req.project, "tech_lead")
    kind = RepoTicketPlanContext if isinstance(plan, TicketPlanContext) else RepoPlanContext
    context = kind(**dict(plan), localization=localization)
    return repo.with_files(context, req.pk, wanted, budget)


def engineer_context(requirement_id, task_key: str, attempt: int) -> EngineerContext | RepoEngineerContext:
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    row = req.plan_tasks.get(key=task_key)
    task = PlannedTask(key=row.key, title=row.title, story_refs=row.story_refs, files=row.files,
                       depends_on=row.depends_on, definition_of_done=row.definition_of_done)
    existing = [] if req.base_sha else workspace_files(req.pk)
    if from_ticket(req):
        context = translators.ticket_task_to_engineer_context(task, ticket_of(req), ticket_plan_of(req).interfaces,
                                                              existing, attempt)
    else:
        context = translators.task_to_engineer_context(task, spec_of(req), approved_stories(req), existing, attempt)
    others = req.plan_tasks.exclude(key=task_key).values_list("files", flat=True)
    context = context.model_copy(update={"planned_elsewhere": sorted({f for files in others for f in files})})
    return _repo_engineer_context(req, context) if req.base_sha else context


def _repo_engineer_context(req: Requirement, greenfield: EngineerContext) -> RepoEngineerContext:
    """On a repository: the task's files and the localization's, as they stand, within the engineer's budget."""
    task = greenfield.task
    localization = repo.localization_of(req)
    wanted = (repo.named(task.files, f"planned file of task {task.key}", localization)
              + repo.localized(localization, skip=set(task.files)))
    budget = repo.budget_for(req.project, "senior_engineer")
    context = RepoEngineerContext(task=task, ticket=repo_ticket(req), acceptance=greenfield.acceptance,
                                  interfaces=greenfield.interfaces, files=[], attempt=greenfield.attempt,
                                  planned_elsewhere=greenfield.planned_elsewhere)
    return repo.with_files(context, req.pk, wanted, budget)


def fix_context(requirement_id, attempt: int) -> FixContext | RepoFixContext:
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    report = latest(req, ArtifactKind.TEST_REPORT)  # the newest run: the engineer's self-tests or QC's gate
    review = latest(req, ArtifactKind.REVIEW, "code_review")
    failed = content_json(report) if report and not report.metadata.get("ok") else {}
    newer_review = review and (not report or review.created_at > report.created_at)
    notes = _review_notes(review) if newer_review and review.metadata.get("verdict") != "approve" else []
    notes += failed.get("gate", {}).get("reasons", [])
    findings = {"failing_tests": failed.get("failing_tests", []), "output_tail": failed.get("output_tail", "")[-6000:],
                "review_notes": notes, "guidance": _guidance(req)}
    if req.base_sha:
        return _repo_fix_context(req, attempt, findings)
    own = [f for f in workspace_files(req.pk) if not engineer_may_not_write(f.path)]
    return FixContext(attempt=attempt, files=own, **findings)


def _repo_fix_context(req: Requirement, attempt: int, findings: dict) -> RepoFixContext:
    """On a repository: the files this change touched, the files of the failing tests, then the localization's,
    as they stand, within the engineer's budget."""
    budget = repo.budget_for(req.project, "senior_engineer")
    context = RepoFixContext(attempt=attempt, ticket=repo_ticket(req), files=[], **findings)
    with repo.checkout(req.pk) as workspace:
        changed = [path for path in workspace.changed_paths() if not engineer_may_not_write(path)]
        tests = dict.fromkeys(test.partition("::")[0] for test in findings["failing_tests"])
        failing = [path for path in read_files(workspace.path, tests) if path not in changed]  # an id need not name a file
    localization = repo.localization_of(req)
    wanted = repo.named(changed, "changed by this requirement", localization)
    wanted += repo.named(failing, "has a failing test", localization)
    wanted += repo.localized(localization, skip=set(changed) | set(failing))
    return repo.with_files(context, req.pk, wanted, budget)


def code_review_context(requirement_id, round: int) -> CodeReviewContext:
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    report = latest(req, ArtifactKind.TEST_REPORT, "self_test")
    diff = latest(req, ArtifactKind.DIFF_SUMMARY, "workspace")
    facts = {"diff_summary": content_json(diff) if diff else [], "round": round,
             "tests_passed": report.metadata.get("passed", 0) if report else 0,
             "lost_tests": report.metadata.get("lost_tests", []) if report else [],
             "acceptance": [c.criterion for c in acceptance_criteria_of(req)],
             "spec": spec_of(req) if latest(req, ArtifactKind.TECHNICAL_SPEC, "technical_spec") else None}
    if req.base_sha:
        return _repo_code_review_context(req, facts)
    return CodeReviewContext(files=workspace_files(req.pk), **facts)


def _repo_code_review_context(req: Requirement, facts: dict) -> RepoCodeReviewContext:
    """On a repository: the diff from the merge base first (up to two thirds of what the budget leaves), then the
    changed files whole where they fit."""
    budget = repo.budget_for(req.project, "tech_lead")
    context = RepoCodeReviewContext(files=[], diff="", **facts)
    with repo.checkout(req.pk) as workspace:
        diff, changed = workspace.diff(), workspace.changed_paths()
        return repo.review_fitted(context, workspace.path, diff, changed, budget)


def qc_context(requirement_id) -> QCContext | RepoQCContext:
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    if req.base_sha:
        return _repo_qc_context(req)
    if from_ticket(req):
        context = translators.ticket_qc_context(ticket_of(req), ticket_plan_of(req).interfaces, workspace_files(req.pk))
    else:
        context = translators.qc_context(approved_stories(req), spec_of(req), workspace_files(req.pk))
    return context.model_copy(update={"guidance": _restated_criteria(req), "findings": _qc_findings(req)})


def _repo_qc_context(req: Requirement) -> RepoQCContext:
    """On a repository: the ticket, the code the change touched (never its tests) and the localization's, as they
    stand, and the tests at the base commit, within QC's budget."""
    interfaces = ticket_plan_of(req).interfaces if from_ticket(req) else spec_of(req).interfaces
    with repo.checkout(req.pk) as workspace:
        changed = [path for path in workspace.changed_paths() if not is_test_file(path)]
    localization = [f for f in repo.localization_of(req) if not is_test_file(f.path)]
    wanted = repo.named(changed, "changed by this requirement", localization)
    wanted += repo.localized(localization, skip=set(changed))
    context = RepoQCContext(criteria=acceptance_criteria_of(req), interfaces=interfaces, modules=changed,
                            guidance=_restated_criteria(req), findings=_qc_findings(req), ticket=repo_ticket(req),
                            baseline=repo.baseline_facts(req), reproduce=req.playbook == "bug_fix")
    return repo.with_files(context, req.pk, wanted, repo.budget_for(req.project, "qc_engineer"))


def devops_context(requirement_id) -> DevOpsContext:
    req = Requirement.objects.select_related("project").get(pk=requirement_id)
    if from_ticket(req):
        summary, tech_stack = ticket_of(req).summary, ticket_plan_of(req).tech_stack
    else:
        spec = spec_of(req)
        summary, tech_stack = spec.summary, spec.tech_stack
    return DevOpsContext(project=req.project.name, summary=summary, tech_stack=tech_stack,
                         files=[f.path for f in workspace_files(req.pk)], test_command=TEST_COMMAND)


def _design_notes(req: Requirement) -> list[str]:
    reviews = req.artifacts.filter(kind=ArtifactKind.REVIEW, name="design_review", metadata__verdict="revise")
    notes = [note for review in reviews.select_related("blob") for note in content_json(review)["notes"]]
    human = req.review_tasks.filter(kind=ReviewKind.DESIGN_REVIEW, state=ReviewState.RESOLVED,
                                    decision=Decision.REQUEST_CHANGES).values_list("feedback", flat=True)
    code_reviews = req.artifacts.filter(kind=ArtifactKind.REVIEW, name="code_review").select_related("blob")
    spec_issues = [issue for review in code_reviews for issue in content_json(review).get("spec_issues", [])]
    return (notes + [f"From a human reviewer: {text}" for text in human]
            + [f"Found in code review (the spec is inconsistent): {issue}" for issue in spec_issues])


def _review_notes(review) -> list[str]:
    """The code review's notes, and its spec issues (the spec, where there is one, was revised for them since)."""
    verdict = content_json(review)
    return verdict["notes"] + [f"Spec issue found in review: {issue}" for issue in verdict.get("spec_issues", [])]


def _restated_criteria(req: Requirement) -> list[str]:
    """What humans answered, for the BA, when QC could not test criteria as written (gate_routing)."""
    return list(req.review_tasks.filter(kind=ReviewKind.ESCALATION, resume_target=step_keys.QC_TESTS,
                                        state=ReviewState.RESOLVED, decision=Decision.REQUEST_CHANGES)
                .order_by("created_at").values_list("feedback", flat=True))


def _qc_findings(req: Requirement) -> list[str]:
    """Why the gate handed QC's tests back, when it did after QC last wrote them: the tests that did not run, and
    the reproduction tests that passed at the base commit."""
    written = latest(req, ArtifactKind.ACCEPTANCE_COVERAGE)
    events = {name: req.events.filter(name=name).order_by("-id").first() for name in (TESTS_NOT_RUN, NOT_REPRODUCED)}
    handed = {name: e.payload for name, e in events.items() if e and not (written and written.created_at > e.created_at)}
    findings = [f"{criterion}: {', '.join(tests)} did not run (skipped, deselected or never collected)"
                for criterion, tests in handed.get(TESTS_NOT_RUN, {}).get("criteria", {}).items()]
    return findings + [f"{test} passed at the base commit, before the change: it does not reproduce the bug. Write "
                       "it so that it fails at the base commit and passes once the bug is fixed"
                       for test in handed.get(NOT_REPRODUCED, {}).get("tests", [])]


def _guidance(req: Requirement) -> list[str]:
    """What humans said: guidance on escalations and code reviews, and reasons for refusing a deployment."""
    resolved = req.review_tasks.filter(state=ReviewState.RESOLVED).order_by("created_at")
    guided = resolved.filter(kind__in=[ReviewKind.ESCALATION, ReviewKind.CODE_REVIEW], resume_target=step_keys.FIX,
                             decision=Decision.REQUEST_CHANGES).values_list("feedback", flat=True)
    refused = resolved.filter(kind=ReviewKind.DEPLOYMENT_APPROVAL, decision=Decision.REJECT).values_list("reason", flat=True)
    return [*guided, *(f"Deployment refused: {reason}" for reason in refused)]

