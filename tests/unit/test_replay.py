"""Replay of a recorded run: same transitions and artifact hashes, no model, no sandbox, no push, no network."""
import os
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from agents.delivery import git_remote
from agents.llm.base import LLMError, LLMRequest, ToolSpec
from agents.llm.replay import ReplayProvider
from lifecycle.actors import Actor
from lifecycle.errors import IllegalTransition
from lifecycle.models import LLMCall, Replay, Requirement, ReviewTask, StateTransition, Step, StoryEdit
from lifecycle.replay.compare import artifact_hashes, request_fingerprints, transition_sequence
from lifecycle.replay.runs import replay_start
from lifecycle.services.assignment import review_claim
from lifecycle.services.story_edits import story_edit, story_version
from tests.conftest import staff_client
from tests.flows import decide, fresh, pending, submit

pytestmark = pytest.mark.django_db(transaction=True)


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"a replay must not use {what}")
    return refuse


@pytest.fixture
def demo_run(settings, tmp_path) -> Requirement:
    """`make demo`'s run (autonomous mode, the bundled cassette, the real sandbox, a local bare remote)."""
    settings.AITEAM_AUTONOMOUS = True
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    call_command("aiteam_demo", approve_deployment=True, stdout=StringIO())
    settings.AITEAM_AUTONOMOUS = False  # the replay re-applies the recorded decisions itself
    return Requirement.objects.get(replay_of=None)


@pytest.fixture
def go_offline(settings, monkeypatch):
    """After the source run: nothing a replay needs from outside, no model provider (the configured one would
    need a key and the network, which the tests block), no API key, no sandbox, no delivery."""
    def go() -> None:
        settings.AITEAM_LLM_PROVIDER = "anthropic"
        monkeypatch.setattr("lifecycle.runner.provider_from_settings", _refuse("the model provider"))
        monkeypatch.setattr("agents.sandbox.run_tests", _refuse("the sandbox"))
        monkeypatch.setattr("agents.delivery.deliver", _refuse("delivery"))
        assert "ANTHROPIC_API_KEY" not in os.environ
    return go


def test_replay_of_the_demo_run_reproduces_its_transitions_and_artifact_hashes_offline(demo_run, go_offline):
    go_offline()
    remote = git_remote.remote_branches(_workspace(demo_run), _remote_of(demo_run))
    out = StringIO()
    call_command("aiteam_replay", str(demo_run.pk), stdout=out)
    replay = Requirement.objects.get(replay_of=demo_run)
    assert replay.state == "deployed"
    assert transition_sequence(replay) == transition_sequence(demo_run)
    events = [event for subject, event, *_ in transition_sequence(replay) if subject == "requirement"]
    assert events == ["submit", "clarify", "create_stories", "approve_design", "start_development",
                      "retry_development", "submit_for_review", "pass_code_review", "pass_quality_gate", "deploy"]
    assert artifact_hashes(replay) == artifact_hashes(demo_run)
    assert {kind for kind, *_ in artifact_hashes(replay)} >= {"source_file", "test_file", "test_report", "delivery"}
    assert request_fingerprints(replay) == request_fingerprints(demo_run)  # the same requests were asked, too
    assert replay.replay_run.verdict == Replay.Verdict.MATCHED
    assert "verdict: matched" in out.getvalue() and "DIFFERS" not in out.getvalue()
    assert set(replay.review_tasks.values_list("decided_by_policy", flat=True)) == {"replay"}
    assert git_remote.remote_branches(_workspace(demo_run), _remote_of(demo_run)) == remote  # nothing pushed


def test_a_missing_recorded_call_fails_the_step_naming_it_and_the_command_exits_non_zero(demo_run, go_offline):
    go_offline()
    LLMCall.objects.filter(requirement=demo_run, step__key="tl_plan").delete()
    out = StringIO()
    with pytest.raises(CommandError, match="differs"):
        call_command("aiteam_replay", str(demo_run.pk), stdout=out)
    replay = Requirement.objects.get(replay_of=demo_run)
    step = Step.objects.get(requirement=replay, key="tl_plan")
    assert step.state == "failed"
    assert "replay: step tl_plan#1 asks for model call #1 (tech_lead, submit_implementation_plan_output) but the " \
           "source run recorded 0 call(s) for that step" in step.error
    assert replay.state == "design_ready" and replay.replay_run.verdict == Replay.Verdict.DIFFERS
    held = pending(replay, "step_failed")
    assert held.next_sweep_at is None  # the gate the source never had is held, not swept
    assert "DIFFERS: transition #" in out.getvalue() and "replay step error: tl_plan#1" in out.getvalue()


def test_a_run_decided_by_people_replays_their_decisions_and_delivers_nothing(alice, rita, settings, tmp_path,
                                                                               go_offline):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    source = submit(alice)
    decide(pending(source, "stories_approval"), rita, "approve")
    decide(pending(fresh(source), "deployment_approval"), rita, "approve")
    assert fresh(source).state == "deployed"
    go_offline()
    replay = fresh(replay_start(source_id=source.pk, user=alice, via="api"))
    assert replay.state == "deployed" and replay.replay_run.verdict == Replay.Verdict.MATCHED
    deployment = replay.review_tasks.get(kind="deployment_approval")
    assert (deployment.decision, deployment.decided_by, deployment.decided_by_policy) == ("approve", None, "replay")
    audit = replay.transitions.get(subject="review_task", subject_id=str(deployment.pk), event="resolve")
    assert audit.actor_role == "replay" and audit.metadata["origin"]["decided_by"] == "rita"
    assert replay.llm_calls.filter(provider="replay").count() == source.llm_calls.count()


def test_a_rejection_replays_with_its_reason_and_the_replay_waits_where_the_source_waits(alice, rita):
    source = submit(alice)
    decide(pending(source, "stories_approval"), rita, "reject", reason="Listing must state the output format")
    replay = fresh(replay_start(source_id=source.pk, via="cli"))
    rejected = replay.review_tasks.get(kind="stories_approval", round=1)
    assert (rejected.decision, rejected.reason, rejected.decided_by_policy) == (
        "reject", "Listing must state the output format", "replay")
    assert replay.story_round == fresh(source).story_round == 2
    assert pending(replay, "stories_approval").round == 2
    assert replay.replay_run.verdict == Replay.Verdict.MATCHED


def test_a_run_waiting_for_a_human_replays_to_the_same_gate_and_leaves_it_open_even_in_autonomous_mode(alice, settings):
    source = submit(alice)
    settings.AITEAM_AUTONOMOUS = True  # would approve stories, but a replay only re-applies recorded decisions
    replay = fresh(replay_start(source_id=source.pk, via="cli"))
    assert replay.state == source.state == "user_stories_created"
    held = pending(replay, "stories_approval")
    assert held.next_sweep_at is None and held.decide_by is None
    assert replay.replay_run.verdict == Replay.Verdict.MATCHED


def test_a_replays_held_gate_is_nobodys_work_in_the_inbox_or_on_the_dashboard(alice, rita):
    source = submit(alice)
    held = pending(fresh(replay_start(source_id=source.pk, via="cli")), "stories_approval")
    decide(pending(source, "stories_approval"), rita, "reject", reason="not yet")  # the source's own gate, decided
    ReviewTask.objects.filter(pk=held.pk).update(sla_deadline=timezone.now() - timedelta(days=3))
    client = staff_client(rita)
    for inbox in ("", "?sla=overdue"):
        page = client.get(f"/admin/lifecycle/reviewtask/{inbox}").content.decode()
        assert f"{held.pk}/change/" not in page and 'Overdue<span class="count">0</span>' in page
    assert f"{held.pk}/change/" in client.get("/admin/lifecycle/reviewtask/?status=all").content.decode()  # a record
    dashboard = client.get("/staff/dashboard/").content.decode()
    assert '<span class="value">0</span>past their SLA' in dashboard and "Stories Approval #1" not in dashboard


def test_a_replays_held_gate_page_says_it_is_held_and_offers_no_decision_and_a_decision_is_refused(alice, rita):
    source = submit(alice)
    held = pending(fresh(replay_start(source_id=source.pk, via="cli")), "stories_approval")
    client = staff_client(rita)
    page = client.get(f"/admin/lifecycle/reviewtask/{held.pk}/change/").content.decode()
    assert 'id="held"' in page and "a replay&#x27;s gate, decided only as its source" in page
    assert 'name="decision"' not in page and "/decide/" not in page and "/claim/" not in page

    posted = client.post(f"/admin/lifecycle/reviewtask/{held.pk}/decide/", {"decision": "approve"})
    html = posted.content.decode()
    assert posted.status_code == 409 and 'id="held"' in html and 'name="decision"' not in html
    with pytest.raises(IllegalTransition, match="a replay's"):
        decide(held, rita, "approve")  # the API's and the assistant's way too
    with pytest.raises(IllegalTransition, match="a replay's"):
        review_claim(task_id=held.pk, actor=Actor.human(rita, "api"))
    story = held.requirement.stories.get(position=1)
    with pytest.raises(IllegalTransition, match="a replay's"):  # its stories are the record too
        story_edit(task_id=held.pk, story_id=story.pk, actor=Actor.human(rita, "admin"),
                   changes={"title": "Changed by a person"}, version=story_version(story))
    assert not StoryEdit.objects.exists() and held.requirement.stories.get(position=1).title == story.title
    assert ReviewTask.objects.get(pk=held.pk).is_pending
    assert not StateTransition.objects.filter(subject="review_task", subject_id=str(held.pk),
                                              event__in=["resolve", "claim"]).exists()


def test_a_run_still_working_cannot_be_replayed(alice):
    source = submit(alice)
    Step.objects.create(requirement=source, key="tl_plan", attempt=1)
    with pytest.raises(IllegalTransition, match="still running"):
        replay_start(source_id=source.pk, via="cli")
    with pytest.raises(CommandError, match="still running"):
        call_command("aiteam_replay", str(source.pk), stdout=StringIO())
    assert not Requirement.objects.filter(replay_of=source).exists()


def test_the_command_names_an_unknown_requirement(db):
    with pytest.raises(CommandError, match="no requirement 00000000-0000-0000-0000-000000000000"):
        call_command("aiteam_replay", "00000000-0000-0000-0000-000000000000", stdout=StringIO())


def _workspace(requirement: Requirement):
    from lifecycle.services.development import workspace_for

    return workspace_for(requirement).path


def _remote_of(requirement: Requirement):
    from lifecycle.services.artifacts import content_json, latest
    from lifecycle.services.repositories import project_remote

    remote = project_remote(requirement.project)
    assert remote.url == content_json(latest(requirement, "delivery", "delivery"))["remote_url"]
    return remote


def test_the_admin_action_replays_the_selected_requirements_and_shows_the_comparison(alice):
    from tests.conftest import staff_client

    source = submit(alice)
    client = staff_client(alice)
    response = client.post("/admin/lifecycle/requirement/", {"action": "replay_selected",
                                                             "_selected_action": [str(source.pk)]}, follow=True)
    replay = Requirement.objects.get(replay_of=source)
    assert f'replay <a href="/admin/lifecycle/requirement/{replay.pk}/change/">{replay.pk}</a> started' \
        in response.content.decode()
    page = client.get(f"/admin/lifecycle/requirement/{replay.pk}/change/").content.decode()
    assert "<b>matched</b>" in page and str(source.pk) in page
    assert str(replay.pk) in client.get(f"/admin/lifecycle/requirement/{source.pk}/change/").content.decode()


def test_the_admin_action_reports_a_run_still_working_and_starts_nothing(alice):
    from tests.conftest import staff_client

    source = submit(alice)
    Step.objects.create(requirement=source, key="tl_plan", attempt=1)
    response = staff_client(alice).post("/admin/lifecycle/requirement/", {
        "action": "replay_selected", "_selected_action": [str(source.pk)]}, follow=True)
    assert "is still running" in response.content.decode()
    assert not Requirement.objects.filter(replay_of=source).exists()


def test_the_api_starts_a_replay_and_shows_its_verdict(alice):
    from tests.conftest import api_for

    source = submit(alice)
    response = api_for(alice).post(f"/api/v1/requirements/{source.pk}/replay/", {}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["replay_of"] == str(source.pk) and body["state"] == "user_stories_created"
    assert body["replay"]["verdict"] == "matched" and body["replay"]["differences"] == []
    detail = api_for(alice).get(f"/api/v1/requirements/{body['id']}/").json()
    assert detail["replay"]["comparison"]["transitions"]["equal"] is True
    assert api_for(alice).get(f"/api/v1/requirements/{source.pk}/").json()["replay"] is None


def test_the_api_refuses_other_tenants_reviewers_unknown_input_and_runs_still_working(alice, rita, oscar):
    from tests.conftest import api_for

    source = submit(alice)
    url = f"/api/v1/requirements/{source.pk}/replay/"
    assert api_for(oscar).post(url, {}, format="json").status_code == 404
    assert api_for(rita).post(url, {}, format="json").status_code == 403  # a reviewer may not submit work
    bad = api_for(alice).post(url, {"force": True}, format="json")
    assert bad.status_code == 400 and bad.json() == {"force": ["unknown field"]}
    Step.objects.create(requirement=source, key="tl_plan", attempt=1)
    busy = api_for(alice).post(url, {}, format="json")
    assert busy.status_code == 409 and "still running" in busy.json()["detail"]
    assert not Requirement.objects.filter(replay_of=source).exists()


def test_a_second_replay_of_a_source_is_refused_while_the_first_is_still_running(alice):
    """A retried or doubled POST finds the first replay running (409) instead of starting a second one."""
    from tests.conftest import api_for

    source = submit(alice)
    first = replay_start(source_id=source.pk, user=alice, via="api")
    Replay.objects.filter(requirement=first).update(verdict=Replay.Verdict.RUNNING)  # as while its steps run
    url = f"/api/v1/requirements/{source.pk}/replay/"
    again = api_for(alice).post(url, {}, format="json")
    assert again.status_code == 409 and "still running" in again.json()["detail"]
    assert Requirement.objects.filter(replay_of=source).count() == 1
    Replay.objects.filter(requirement=first).update(verdict=Replay.Verdict.MATCHED)  # compared: another may start
    assert api_for(alice).post(url, {}, format="json").status_code == 202


def test_a_missing_recorded_sandbox_report_is_a_clear_error_naming_the_step(alice):
    from lifecycle.replay.recordings import RecordingMissing, recorded_output
    from lifecycle.services.leases import Lease

    source = submit(alice)  # stopped before any test ran
    lease = Lease(step_id=0, fence=1, requirement_id=None, key="self_test", attempt=2)
    with pytest.raises(RecordingMissing, match="replay: step self_test#2 needs recorded test_report 'self_test' #1 "
                                               "but the source run recorded 0"):
        recorded_output(source_id=source.pk, lease=lease)


def test_the_sweep_compares_a_replay_that_came_to_rest_without_an_announcing_event(demo_run, go_offline):
    go_offline()
    replay = replay_start(source_id=demo_run.pk)
    assert Replay.objects.get(requirement=replay).verdict == Replay.Verdict.MATCHED
    Replay.objects.filter(requirement=replay).update(verdict=Replay.Verdict.RUNNING, comparison={})  # as if missed
    from lifecycle.replay.runs import replays_sweep

    assert replays_sweep() == 1
    assert Replay.objects.get(requirement=replay).verdict == Replay.Verdict.MATCHED
    assert replays_sweep() == 0  # nothing left running


def test_a_run_with_a_budget_decision_replays_the_same_after_the_project_budgets_changed(
        alice, rita, acme_project, settings, tmp_path, go_offline):
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    acme_project.settings = {"budgets": {"roles": {"tech_lead": {"steps": 1}}}}
    acme_project.save()
    source = submit(alice)
    decide(pending(source, "stories_approval"), rita, "approve")
    decide(pending(fresh(source), "budget_exhausted"), rita, "override_budget",
           budget={"roles": {"tech_lead": {"steps": None}}})
    decide(pending(fresh(source), "deployment_approval"), rita, "approve")
    assert fresh(source).state == "deployed"
    acme_project.settings = {}  # edited since: the run keeps the budgets it was submitted with
    acme_project.save()
    go_offline()
    replay = fresh(replay_start(source_id=source.pk, user=alice, via="api"))
    assert replay.run_settings == {"budgets": {"roles": {"tech_lead": {"steps": 1}}}}
    assert replay.state == "deployed" and replay.replay_run.verdict == Replay.Verdict.MATCHED
    assert replay.transitions.filter(event="exhaust_budget").count() == 1


@pytest.mark.parametrize("interaction,problem", [
    ({"usage": {"input_tokens": 5}}, "has no tool_input object"),
    ({"tool_input": {"title": "x"}, "usage": {"input_tokens": 5, "cache_read_input_tokens": 3}},
     "has usage {'input_tokens': 5, 'cache_read_input_tokens': 3}; expected whole token counts under input_tokens"),
    ({"tool_input": {"title": "x"}, "usage": {"input_tokens": "many"}}, "expected whole token counts"),
])
def test_a_malformed_cassette_interaction_is_an_llm_error_naming_it(interaction, problem):
    cassette = ReplayProvider([{"role": "tech_lead", "recorded_for": {"title": "x"}, "match": ["the plan"],
                                **interaction}])
    request = LLMRequest(role="tech_lead", model="claude-x", system="Write the plan.",
                         messages=[{"role": "user", "content": '{"title": "x"}'}],
                         tool=ToolSpec(name="submit_plan", description="The plan.", input_schema={}))
    with pytest.raises(LLMError) as caught:
        cassette.complete(request)
    assert "the cassette interaction for role 'tech_lead' matching ['the plan']" in str(caught.value)
    assert problem in str(caught.value)
