"""The PO → BA → stories review flow on the embedded default (SQLite, eager Celery, replay)."""
import pytest

from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import OutboxEvent, Step, UserStory
from tests.flows import VAGUE, decide, fresh, pending, submit, transitions

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_clear_brief_becomes_a_doc_then_stories_awaiting_review(alice):
    req = submit(alice)
    assert req.state == "user_stories_created"
    assert transitions(req) == [
        ("", "submit", "received"),
        ("received", "clarify", "clarified"),
        ("clarified", "create_stories", "user_stories_created"),
    ]
    assert req.docs.get().objectives
    stories = list(req.stories.all())
    assert len(stories) == 4 and all(s.state == "draft" and s.acceptance_criteria for s in stories)
    task = pending(req, "stories_approval")
    assert [s["title"] for s in task.context["stories"]] == [s.title for s in stories]
    assert req.llm_calls.count() == 2 and req.llm_calls.filter(input_tokens__gt=0).count() == 2
    assert not OutboxEvent.objects.filter(sent_at=None).exists()


def test_approval_by_a_reviewer_approves_every_story_and_is_audited(alice, rita):
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "approve")
    assert set(req.stories.values_list("state", flat=True)) == {"approved"}
    assert set(req.stories.values_list("decided_by__username", flat=True)) == {"rita"}
    audit = req.transitions.get(subject="review_task")
    assert (audit.actor_user.username, audit.via, audit.metadata["decision"]) == ("rita", "api", "approve")
    assert "approve_design" in [t[1] for t in transitions(req)]  # approval starts the design


def test_rejection_keeps_the_reason_and_the_ba_reworks_with_it(alice, rita):
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "reject", reason="Listing must state the output format")
    req = fresh(req)
    assert req.state == "user_stories_created" and req.story_round == 2
    assert transitions(req)[-2:] == [
        ("user_stories_created", "reject_stories", "clarified"),
        ("clarified", "create_stories", "user_stories_created"),
    ]
    first, second = req.stories.filter(round=1), req.stories.filter(round=2)
    assert {s.state for s in first} == {"rejected"}
    assert first.first().rejection_reason == "Listing must state the output format"
    assert second.count() == 5 and {s.state for s in second} == {"draft"}
    ba_round_two = req.llm_calls.filter(role="business_analyst").last()
    assert "Listing must state the output format" in ba_round_two.messages[0]["content"]


def test_a_third_send_back_escalates_instead_of_looping(alice, rita, settings):
    settings.AITEAM_MAX_STORY_ROUNDS = 2
    req = submit(alice)
    decide(pending(req, "stories_approval"), rita, "request_changes", feedback="add export")
    decide(pending(req, "stories_approval"), rita, "request_changes", feedback="still not right")
    req = fresh(req)
    assert req.state == "clarified" and req.story_round == 2
    escalation = pending(req, "escalation")
    assert not req.review_tasks.filter(kind="stories_approval").pending().exists()
    decide(escalation, rita, "request_changes", feedback="one more try, with export")
    assert fresh(req).state == "user_stories_created" and fresh(req).story_round == 3


def test_a_vague_brief_blocks_with_questions_until_a_human_answers(alice, rita):
    req = submit(alice, brief=VAGUE)
    assert req.state == "blocked"
    task = pending(req, "clarification")
    assert len(task.context["questions"]) == 3 and "Who are the users" in task.question
    decide(task, rita, "answer", answer="A small team tracking its to-dos; day one: add and complete tasks.")
    req = fresh(req)
    assert [t[1] for t in transitions(req)] == ["submit", "block", "answer", "clarify", "create_stories"]
    assert req.clarifications[0]["answer"].startswith("A small team")
    assert req.docs.get(version=2).objectives == ["Add a task with a title", "Mark a task done", "List open and done tasks"]


def test_each_decision_acts_on_its_own_text_not_another_sent_alongside(alice, rita):
    req = submit(alice, brief=VAGUE)
    decide(pending(req, "clarification"), rita, "answer", answer="Readers at home, 10k books", feedback="good questions")
    assert fresh(req).clarifications[-1]["answer"] == "Readers at home, 10k books"


def test_only_reviewers_of_the_organization_may_decide(alice, sam, oscar):
    req = submit(alice)
    task = pending(req, "stories_approval")
    for user in (sam, oscar):
        with pytest.raises(NotPermitted):
            decide(task, user, "approve")
    assert pending(req, "stories_approval").state == "open"


def test_a_decision_needs_its_text_and_must_be_an_option(alice, rita):
    task = pending(submit(alice), "stories_approval")
    with pytest.raises(DomainError) as no_reason:
        decide(task, rita, "reject")
    assert no_reason.value.field == "reason"
    with pytest.raises(DomainError) as not_option:
        decide(task, rita, "answer", answer="x")
    assert not_option.value.field == "decision"


def test_a_decided_task_cannot_be_decided_again(alice, rita):
    task = pending(submit(alice), "stories_approval")
    decide(task, rita, "approve")
    with pytest.raises(IllegalTransition):
        decide(task, rita, "reject", reason="too late")


def test_autonomous_mode_approves_and_says_so(alice, settings):
    settings.AITEAM_AUTONOMOUS = True
    req = submit(alice)
    task = req.review_tasks.get(kind="stories_approval")
    assert (task.state, task.decision, task.decided_by, task.decided_by_policy) == ("resolved", "approve", None, "autonomous")
    assert set(UserStory.objects.filter(requirement=req).values_list("decided_by_policy", flat=True)) == {"autonomous"}


def test_every_step_ran_once_and_is_done(alice):
    req = submit(alice)
    assert list(Step.objects.filter(requirement=req).values_list("key", "attempt", "state", "runs", "fence")) == [
        ("po_clarify", 1, "done", 1, 1),
        ("ba_stories", 1, "done", 1, 1),
    ]
