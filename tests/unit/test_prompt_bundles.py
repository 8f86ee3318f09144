"""Prompt versions: a requirement keeps the bundle it started with, identified by its hash."""
import pytest

from agents import prompts
from agents.prompts import bundle_hash, prompt_files, with_data_rule
from lifecycle.errors import DomainError
from lifecycle.models import LLMCall, Project, PromptBundle, Step
from lifecycle.services import dispatch
from lifecycle.services.promotions import current_version
from tests.conftest import api_for
from tests.flows import submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_bundle_hash_is_recorded_at_submission_and_shown(alice):
    req = submit(alice)
    assert req.prompt_bundle_id == bundle_hash(prompt_files())
    assert api_for(alice).get(f"/api/v1/requirements/{req.pk}/").data["prompt_bundle"] == req.prompt_bundle_id
    po_call = LLMCall.objects.get(requirement=req, role="product_owner")
    assert po_call.system == with_data_rule(prompt_files()["product_owner"])


def test_a_running_requirement_keeps_its_prompts_when_the_files_change(alice, monkeypatch, tmp_path):
    held = []
    monkeypatch.setattr(dispatch, "send_step", lambda step_id, key, countdown=None: held.append(step_id))
    req = submit(alice)
    monkeypatch.undo()
    edited = tmp_path / "prompts"
    edited.mkdir()
    for name, text in prompt_files().items():
        (edited / f"{name}.md").write_text(text + "\nEDITED AFTER SUBMISSION")
    monkeypatch.setattr(prompts, "PROMPT_DIR", edited)
    prompts.load_prompt.cache_clear()
    dispatch.send_step(held[0], "po_clarify")
    assert "EDITED" not in LLMCall.objects.get(requirement=req, role="product_owner").system
    later = submit(alice)
    assert later.prompt_bundle_id != req.prompt_bundle_id  # a new requirement gets the new bundle
    assert "EDITED" in LLMCall.objects.get(requirement=later, role="product_owner").system
    prompts.load_prompt.cache_clear()


def test_a_project_override_changes_the_bundle_and_the_prompt_used(alice):
    project = Project.objects.get(organization__slug="acme")
    project.settings = {"prompts": {"product_owner": "You are a terse Product Owner. Use the tool."}}
    project.save()
    req = submit(alice)
    assert req.prompt_bundle.prompts["product_owner"].startswith("You are a terse")
    assert LLMCall.objects.get(requirement=req, role="product_owner").system.startswith("You are a terse")
    assert Step.objects.filter(requirement=req).exists()


def test_unknown_prompt_overrides_are_refused(alice):
    project = Project.objects.get(organization__slug="acme")
    project.settings = {"prompts": {"poet": "Write a sonnet."}}
    project.save()
    with pytest.raises(DomainError, match="poet"):
        submit(alice)


def test_a_prompt_file_added_later_leaves_a_pinned_version_as_it_is(alice, monkeypatch, tmp_path):
    project = Project.objects.get(organization__slug="acme")
    pinned = {name: f"{text}\nPINNED" for name, text in prompt_files().items()}
    project.settings = {"prompts": pinned}  # as a promotion pins a bundle: every prompt's text
    project.save()
    version = current_version(project, "prompts")[0]
    assert version == bundle_hash(pinned)
    shipped = tmp_path / "prompts"
    shipped.mkdir()
    for name, text in {**prompt_files(), "new_role": "A role shipped after the pin."}.items():
        (shipped / f"{name}.md").write_text(text)
    monkeypatch.setattr(prompts, "PROMPT_DIR", shipped)

    assert current_version(project, "prompts")[0] == version  # the project's version id stays
    assert PromptBundle.objects.get(sha256=version).prompts == pinned
    req = submit(alice)
    assert req.prompt_bundle.prompts == {**pinned, "new_role": "A role shipped after the pin."}  # the file fills in
