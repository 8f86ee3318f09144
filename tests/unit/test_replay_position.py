"""Where a replayed step picks up in its source's recorded calls when it runs again."""
import pytest

from agents.llm.base import LLMRequest, ToolSpec
from lifecycle.models import LLMCall, Requirement, Step
from lifecycle.replay.recordings import replay_provider
from lifecycle.services.leases import Lease

pytestmark = pytest.mark.django_db
TOOL = ToolSpec(name="submit_plan", description="d", input_schema={})


def call(requirement, step, answer: str = "", error: str = "") -> LLMCall:
    content = [] if error else [{"type": "tool_use", "id": "toolu_1", "name": TOOL.name, "input": {"answer": answer}}]
    return LLMCall.objects.create(requirement=requirement, step=step, role="tech_lead", provider="p", model="m",
                                  system_sha256="0" * 64, system="s", tool_name=TOOL.name,
                                  response=None if error else {"content": content, "stop_reason": "tool_use"},
                                  error=error)


def test_a_recorded_miss_does_not_count_as_a_replayed_call(acme_project):
    source = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b")
    replay = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b",
                                        replay_of=source)
    source_step = Step.objects.create(requirement=source, key="tl_plan", attempt=1)
    replay_step = Step.objects.create(requirement=replay, key="tl_plan", attempt=1)
    call(source, source_step, answer="first"), call(source, source_step, answer="second")
    call(replay, replay_step, answer="first")  # replayed, then the step failed on a miss, recorded too
    call(replay, replay_step, error="ReplayMissError: replay: step tl_plan#1 asks for model call #2 ...")
    lease = Lease(replay_step.pk, 1, replay.pk, "tl_plan", 1)
    request = LLMRequest(role="tech_lead", model="m", system="s", messages=[], tool=TOOL)
    assert replay_provider(source_id=source.pk, lease=lease).complete(request).tool_input == {"answer": "second"}
