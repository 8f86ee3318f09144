"""The requirement lifecycle matches DESIGN.md's table exactly: every row works with its guard,
every other (state, event) pair is refused, and random walks never reach an illegal state.
The bug_fix playbook has its own table: no story edges, plus clarified → design_ready (accept_ticket)."""
import hashlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_fsm import TransitionNotAllowed
from django_fsm.signals import pre_transition
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from lifecycle.actors import Actor
from lifecycle.errors import IllegalTransition
from lifecycle.models import Artifact, ArtifactBlob, Requirement, RequirementDoc, ReviewTask, UserStory
from lifecycle.services.transitions import transition
from lifecycle.states import RequirementState

# (from, event, to) — DESIGN.md's lifecycle table, written out independently of the model.
TABLE = {
    ("received", "clarify", "clarified"),
    ("received", "block", "blocked"),
    ("blocked", "answer", "received"),
    ("clarified", "create_stories", "user_stories_created"),
    ("clarified", "request_clarification", "received"),
    ("user_stories_created", "approve_design", "design_ready"),
    ("user_stories_created", "reject_stories", "clarified"),
    ("design_ready", "start_development", "in_development"),
    ("design_ready", "reopen_stories", "user_stories_created"),
    ("in_development", "submit_for_review", "in_review"),
    ("in_development", "retry_development", "in_development"),
    ("in_development", "escalate", "escalated"),
    ("escalated", "resume_development", "in_development"),
    ("in_review", "pass_code_review", "test_pending"),
    ("in_review", "fail_code_review", "in_development"),
    ("test_pending", "pass_quality_gate", "ready_to_deploy"),
    ("test_pending", "fail_quality_gate", "in_development"),
    ("ready_to_deploy", "deploy", "deployed"),
    ("ready_to_deploy", "reject_deployment", "test_pending"),
} | {(s, "cancel", "cancelled") for s in RequirementState.values if s not in ("deployed", "cancelled")}
# The budget gate: from every state where steps run to escalated, and back to exactly the state it came from.
WORKING = ["received", "clarified", "user_stories_created", "design_ready", "in_development", "in_review", "test_pending",
           "ready_to_deploy"]
TABLE |= {(s, "exhaust_budget", "escalated") for s in WORKING} | {("escalated", "resume_budget", s) for s in WORKING}
# A reviewer's override of the triage: back to received before design or planning starts (its guard holds until
# an architect or plan step exists: tests/unit/test_triage_override.py).
TABLE |= {(s, "retriage", "received") for s in ["received", "blocked", "clarified", "user_stories_created"]}
# bug_fix writes no stories: every story edge is refused, and the clarified ticket goes to design_ready.
STORY_EVENTS = {"create_stories", "reject_stories", "approve_design", "reopen_stories"}
BUG_FIX_TABLE = {row for row in TABLE if row[1] not in STORY_EVENTS} | {("clarified", "accept_ticket", "design_ready")}
TABLES = {"new_feature": TABLE, "bug_fix": BUG_FIX_TABLE}
EVENTS = sorted({e for table in TABLES.values() for _, e, _ in table})
GUARDED = {"clarify", "block", "answer", "create_stories", "approve_design", "reject_stories", "start_development",
           "submit_for_review", "escalate", "resume_development", "deploy", "accept_ticket", "exhaust_budget",
           "resume_budget"}
ACTOR = Actor.system("test")


def _in_state(req: Requirement, state: str) -> Requirement:
    Requirement.objects.filter(pk=req.pk).update(state=state)
    return Requirement.objects.get(pk=req.pk)


def _artifact(req, kind, name=None, **fields):
    blob, _ = ArtifactBlob.objects.get_or_create(sha256=hashlib.sha256(kind.encode()).hexdigest(),
                                                 defaults={"content": kind, "size": len(kind)})
    name = name or kind
    version = req.artifacts.filter(kind=kind, name=name).count() + 1
    return Artifact.objects.create(requirement=req, kind=kind, name=name, version=version, blob=blob, **fields)


def _task(req, kind, state, **fields):
    task = ReviewTask.objects.create(organization_id=req.organization_id, requirement=req, kind=kind,
                                     round=req.review_tasks.filter(kind=kind).count() + 1, question="?",
                                     sla_deadline="2100-01-01T00:00:00Z", **fields)
    ReviewTask.objects.filter(pk=task.pk).update(state=state)


def _story(req, state, **fields):
    position = req.stories.filter(round=req.story_round).count() + 1
    story = UserStory.objects.create(requirement=req, round=req.story_round, position=position, title="t", as_a="a",
                                     i_want="w", so_that="s", acceptance_criteria=["c"], priority="must",
                                     story_points=1, **fields)
    UserStory.objects.filter(pk=story.pk).update(state=state)


def satisfy(req: Requirement, event: str, user) -> None:
    """Create what the event's guards ask for, as the flow would have."""
    if event == "clarify":
        RequirementDoc.objects.get_or_create(requirement=req, version=req.clarification_round, defaults={"summary": "s"})
    elif event == "block":
        _task(req, "clarification", "open")
    elif event == "answer":
        req.review_tasks.filter(kind="clarification").update(state="resolved")
        if not req.review_tasks.filter(kind="clarification").exists():
            _task(req, "clarification", "resolved")
    elif event == "create_stories":
        _story(req, "draft")
    elif event == "reject_stories":
        req.stories.filter(round=req.story_round).update(state="rejected")
        if not req.stories.filter(round=req.story_round).exists():
            _story(req, "rejected")
    elif event == "approve_design":
        req.stories.filter(round=req.story_round).update(state="approved", decided_by=user)
        if not req.stories.filter(round=req.story_round).exists():
            _story(req, "approved", decided_by=user)
        _artifact(req, "technical_spec", approved=True)
    elif event == "accept_ticket":
        RequirementDoc.objects.update_or_create(requirement=req, version=req.clarification_round,
                                                defaults={"summary": "s", "acceptance_criteria": ["it works"]})
    elif event == "start_development":
        _artifact(req, "implementation_plan")
    elif event == "submit_for_review":
        _artifact(req, "test_report", name="self_test", metadata={"ok": True, "passed": 3, "failed": 0})
    elif event == "escalate":
        Requirement.objects.filter(pk=req.pk).update(dev_attempts=3)
    elif event == "retry_development":
        Requirement.objects.filter(pk=req.pk).update(dev_attempts=1)
    elif event == "resume_development":
        req.review_tasks.filter(kind="escalation").update(state="resolved")
        _task(req, "escalation", "resolved", decision="request_changes")
    elif event == "deploy":
        _task(req, "deployment_approval", "resolved", decision="approve", decided_by=user)
        _artifact(req, "delivery", metadata={"succeeded": True})
    elif event == "exhaust_budget":
        Requirement.objects.filter(pk=req.pk).update(budget_exhausted=True)
    elif event == "resume_budget":  # decided: room again, and the state it paused in recorded
        req.review_tasks.filter(kind="budget_exhausted").update(state="resolved")
        Requirement.objects.filter(pk=req.pk).update(budget_exhausted=False,
                                                     budget_paused_from=req.budget_paused_from or "in_development")


def _requirement(project, playbook: str) -> Requirement:
    return Requirement.objects.create(organization=project.organization, project=project, brief="b", playbook=playbook)


ROWS = [(playbook, *row) for playbook, table in TABLES.items() for row in sorted(table)]


@pytest.mark.django_db
@pytest.mark.parametrize("playbook,source,event,target", ROWS)
def test_each_row_of_the_table_works_once_its_guard_holds(acme_project, rita, playbook, source, event, target):
    req = _in_state(_requirement(acme_project, playbook), source)
    if event in GUARDED:
        with pytest.raises(IllegalTransition, match="guard"):
            transition(req, event, actor=ACTOR)
        req = Requirement.objects.get(pk=req.pk)
    satisfy(req, event, rita)
    if event == "resume_budget":
        Requirement.objects.filter(pk=req.pk).update(budget_paused_from=target)
    req = Requirement.objects.get(pk=req.pk)
    before = timezone.now()
    row = transition(req, event, actor=ACTOR, metadata={"why": "test"})
    saved = Requirement.objects.get(pk=req.pk)
    assert saved.state == target
    assert saved.state_changed_at >= before  # every transition sets it, a self-loop too
    assert (row.from_state, row.event, row.to_state, row.metadata) == (source, event, target, {"why": "test"})


NOT_IN_TABLE = [(playbook, s, e) for playbook, table in TABLES.items() for s in RequirementState.values for e in EVENTS
                if not any(r[:2] == (s, e) for r in table)]


def test_the_bug_fix_edge_exists_only_for_bug_fix_and_the_story_edges_only_for_new_features():
    assert ("new_feature", "clarified", "accept_ticket") in NOT_IN_TABLE
    assert {("bug_fix", s, e) for s, e, _ in TABLE if e in STORY_EVENTS} <= set(NOT_IN_TABLE)


@pytest.mark.django_db
@pytest.mark.parametrize("playbook,source,event", NOT_IN_TABLE)
def test_every_pair_outside_the_table_is_refused(acme_project, rita, playbook, source, event):
    req = _in_state(_requirement(acme_project, playbook), source)
    satisfy(req, event, rita)
    req = Requirement.objects.get(pk=req.pk)
    with pytest.raises(IllegalTransition):
        transition(req, event, actor=ACTOR)
    assert Requirement.objects.get(pk=req.pk).state == source
    assert not req.transitions.exists()


def test_the_state_field_is_protected():
    req = Requirement(brief="b")
    with pytest.raises(AttributeError):
        req.state = "deployed"


@pytest.mark.django_db
@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(playbook=st.sampled_from(sorted(TABLES)),
       walk=st.lists(st.tuples(st.sampled_from(EVENTS), st.booleans()), min_size=1, max_size=25))
def test_random_walks_only_follow_the_table(acme_project, rita, playbook, walk):
    req = _requirement(acme_project, playbook)
    table = TABLES[playbook]
    for event, prepare in walk:
        if prepare:
            satisfy(req, event, rita)
        req = Requirement.objects.get(pk=req.pk)
        before = req.state
        try:
            transition(req, event, actor=ACTOR)
        except IllegalTransition:
            assert Requirement.objects.get(pk=req.pk).state == before
            continue
        assert (before, event, req.state) in table
    rows = list(req.transitions.order_by("id"))
    assert all(a.to_state == b.from_state for a, b in zip(rows, rows[1:], strict=False))
    assert all((r.from_state, r.event, r.to_state) in table for r in rows)


@pytest.mark.django_db
def test_a_guarded_transition_asks_its_guards_once(acme_project, rita):
    """clarified → user_stories_created: has_draft_stories queries the stories. The transition runs the guards
    once (django-fsm's own check); its writes may be queued (write-behind), so only the guard's query is counted."""
    req = _in_state(_requirement(acme_project, "new_feature"), "clarified")
    satisfy(req, "create_stories", rita)
    req = Requirement.objects.get(pk=req.pk)
    with CaptureQueriesContext(connection) as captured:
        transition(req, "create_stories", actor=ACTOR)
    assert sum("lifecycle_userstory" in query["sql"] for query in captured.captured_queries) == 1
    assert Requirement.objects.get(pk=req.pk).state == "user_stories_created"


@pytest.mark.django_db
def test_another_objects_refusal_inside_a_transition_is_not_reported_as_this_ones(acme_project):
    """A pre_transition receiver whose own transition of another row is refused: that refusal propagates as it
    is, not as an IllegalTransition of this requirement, and this requirement is unchanged."""
    req = _in_state(_requirement(acme_project, "new_feature"), "in_development")
    other = _requirement(acme_project, "new_feature")

    def refuse_another(sender, instance, **kwargs):
        raise TransitionNotAllowed("the other row's transition", object=other, method=None)

    pre_transition.connect(refuse_another, sender=Requirement)
    try:
        with pytest.raises(TransitionNotAllowed, match="the other row"):
            transition(req, "retry_development", actor=ACTOR)
    finally:
        pre_transition.disconnect(refuse_another, sender=Requirement)
    assert Requirement.objects.get(pk=req.pk).state == "in_development" and not req.transitions.exists()
