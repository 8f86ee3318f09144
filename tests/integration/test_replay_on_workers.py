"""Replay through real workers on PostgreSQL and Redis: a run decided by a reviewer, with parallel
engineer tasks and real sandbox runs, is replayed by workers that have no usable model provider."""
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command

from lifecycle.models import Replay, Requirement
from lifecycle.replay.compare import artifact_hashes, transition_sequence
from tests.flows import decide, pending, submit
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def state_of(req) -> str:
    return Requirement.objects.get(pk=req.pk).state


def test_the_replay_command_waits_for_the_workers_and_the_replay_matches(start_worker, alice, rita, tmp_path):
    places = {"AITEAM_WORKSPACE_ROOT": str(settings.AITEAM_WORKSPACE_ROOT), "AITEAM_REMOTES_ROOT": str(tmp_path)}
    recorder = start_worker("recorder", concurrency=2, **places)
    source = submit(alice)
    wait_for(lambda: state_of(source) == "user_stories_created", what="stories", timeout=30)
    decide(pending(source, "stories_approval"), rita, "approve")
    wait_for(lambda: state_of(source) == "ready_to_deploy", what="design, code, tests, review and QC", timeout=120)
    decide(pending(source, "deployment_approval"), rita, "approve")
    wait_for(lambda: state_of(source) == "deployed", what="delivery", timeout=30)
    recorder.stop()

    # These workers could not answer a model call: the configured provider has no key and no reachable API.
    start_worker("replayer", concurrency=2, AITEAM_LLM_PROVIDER="anthropic", ANTHROPIC_BASE_URL="http://192.0.2.1:9",
                 AITEAM_REPLAY_CASSETTE="/nonexistent.json", **places)
    out = StringIO()
    call_command("aiteam_replay", str(source.pk), timeout=120, stdout=out)
    replay = Requirement.objects.get(replay_of=source)
    assert replay.state == "deployed" and replay.replay_run.verdict == Replay.Verdict.MATCHED
    assert transition_sequence(replay) == transition_sequence(source)
    assert artifact_hashes(replay) == artifact_hashes(source)
    assert replay.llm_calls.filter(provider="replay", error="").count() == source.llm_calls.count()
    assert "verdict: matched" in out.getvalue()
