"""The requirement lifecycle matches DESIGN.md's table exactly: every row works with its guard,
every other (state, event) pair is refused, and random walks never reach an illegal state."""
import hashlib

import pytest
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
EVENTS = sorted({e for _, e, _ in TABLE})
GUARDED = {"clarify", "block", "answer", "create_stories", "approve_design", "reject_stories", "start_development",
           "submit_for_review", "escalate", "resume_development", "deploy"}
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


@pytest.fixture
def requirement(alice, acme_project):
    return Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")


@pytest.mark.django_db
@pytest.mark.parametrize("source,event,target", sorted(TABLE))
def test_each_row_of_the_table_works_once_its_guard_holds(requirement, rita, source, event, target):
    req = _in_state(requirement, source)
    if event in GUARDED:
        with pytest.raises(IllegalTransition, match="guard"):
            transition(req, event, actor=ACTOR)
        req = Requirement.objects.get(pk=req.pk)
    satisfy(req, event, rita)
    req = Requirement.objects.get(pk=req.pk)
    row = transition(req, event, actor=ACTOR, metadata={"why": "test"})
    assert Requirement.objects.get(pk=req.pk).state == target
    assert (row.from_state, row.event, row.to_state, row.metadata) == (source, event, target, {"why": "test"})


NOT_IN_TABLE = [(s, e) for s in RequirementState.values for e in EVENTS if not any(r[:2] == (s, e) for r in TABLE)]


@pytest.mark.django_db
@pytest.mark.parametrize("source,event", NOT_IN_TABLE)
def test_every_pair_outside_the_table_is_refused(requirement, rita, source, event):
    req = _in_state(requirement, source)
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
@given(walk=st.lists(st.tuples(st.sampled_from(EVENTS), st.booleans()), min_size=1, max_size=25))
def test_random_walks_only_follow_the_table(acme_project, rita, walk):
    req = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")
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
        assert (before, event, req.state) in TABLE
    rows = list(req.transitions.order_by("id"))
    assert all(a.to_state == b.from_state for a, b in zip(rows, rows[1:], strict=False))
    assert all((r.from_state, r.event, r.to_state) in TABLE for r in rows)
