"""The management commands: API accounts, the demo from a clean state with no network, and a user's mistakes
(a brief the cassette never recorded, a missing or empty file, a bad option) ending in one line, not a traceback."""
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.management.commands.aiteam_demo import Command as Demo
from lifecycle.management.commands.aiteam_demo import brief_from_text
from lifecycle.models import ApiToken, Membership, Requirement
from tests.conftest import api_for
from tests.flows import SAMPLE

WORD_COUNTER = "# Word counter\nA command-line tool that counts the words in a text file and prints the total.\n"
ONE_LINE = "A reading list CLI: add books with title and author, mark them read, list unread and read books."


@pytest.mark.django_db
def test_aiteam_user_creates_org_user_and_membership_once_and_a_token_each_run():
    out1, out2 = StringIO(), StringIO()
    call_command("aiteam_user", org="acme", username="alice", role="reviewer", stdout=out1)
    call_command("aiteam_user", org="acme", username="alice", role="admin", stdout=out2)
    first, second = out1.getvalue().strip(), out2.getvalue().strip()
    assert first != second and ApiToken.objects.filter(user__username="alice").count() == 2
    membership = Membership.objects.get(user__username="alice")
    assert (membership.organization.slug, membership.role) == ("acme", "admin")
    assert membership.organization.projects.filter(slug="default").exists()


@pytest.mark.django_db
def test_the_printed_token_works_on_the_api():
    out = StringIO()
    call_command("aiteam_user", org="acme", username="bob", role="submitter", stdout=out)
    client = api_for(None)
    client.credentials(HTTP_AUTHORIZATION=f"Token {out.getvalue().strip()}")
    assert client.get("/api/v1/requirements/").status_code == 200


def test_make_demo_runs_offline_without_a_key_from_a_clean_state_and_replays_the_same(tmp_path):
    """The demo as `make demo` runs it, then `manage.py aiteam_replay <id>` on it, each in a network namespace with
    no network at all where possible."""
    demo = _demo_in_a_clean_state(tmp_path, "--approve-deployment")
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "state: deployed" in demo.stdout
    assert demo.stdout.count("[approved]") == 4
    assert "autonomous mode: approving Stories Approval" in demo.stderr  # the stories by policy, the deployment not:
    assert "autonomous mode: approving Deployment Approval" not in demo.stderr
    assert "approving it as demo, the operator at this terminal" in demo.stdout
    for event in ("clarify", "create_stories", "approve_design", "retry_development", "pass_code_review",
                  "pass_quality_gate", "deploy"):
        assert event in demo.stdout
    assert "attempt 1: 13 passed, 1 failed" in demo.stdout and "attempt 2: 14 passed, 0 failed" in demo.stdout
    assert "T2: fix (attempt 2)" in demo.stdout and str(tmp_path / "workspaces") in demo.stdout
    assert "--- Delivered: yes" in demo.stdout and f"remote: {tmp_path / 'remotes'}" in demo.stdout
    source = re.search(r"=== Requirement (\S+)", demo.stdout).group(1)
    replay = _manage(tmp_path, "aiteam_replay", source)
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
    assert re.search(r"transitions: source (\d+), replay \1, identical", replay.stdout)
    assert "identical hashes" in replay.stdout and "verdict: matched" in replay.stdout
    assert "steps asked differently than recorded: none" in replay.stdout


def test_a_brief_the_cassette_never_recorded_ends_in_one_line_saying_how_to_run_it(tmp_path):
    brief = tmp_path / "word_counter.md"
    brief.write_text(WORD_COUNTER)
    demo = _demo_in_a_clean_state(tmp_path, "--brief", str(brief))
    assert demo.returncode != 0
    last = demo.stderr.strip().splitlines()[-1]
    assert last.startswith("CommandError: replay: the cassette ") and "has no answer recorded for this " \
        "product_owner request" in last and "set ANTHROPIC_API_KEY" in last and "AITEAM_REPLAY_CASSETTE" in last
    assert "Traceback" not in demo.stderr and "Delivered" not in demo.stdout and "Book model" not in demo.stdout


@pytest.mark.django_db(transaction=True)
def test_the_demo_stops_a_brief_the_cassette_never_recorded_at_its_first_model_call(settings, tmp_path):
    settings.AITEAM_AUTONOMOUS = True
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    with pytest.raises(CommandError, match="no answer recorded for this product_owner request") as caught:
        call_command("aiteam_demo", brief=_file(tmp_path, WORD_COUNTER), stdout=StringIO())
    assert "\n" not in str(caught.value)
    req = Requirement.objects.get()
    assert (req.title, req.state) == ("Word counter", "received")
    [call] = req.llm_calls.all()  # not retried: asking the cassette again gets the same answer
    assert call.error.startswith("CassetteMissError: ")
    assert [(s.key, s.state, s.runs) for s in req.steps.all()] == [("po_clarify", "failed", 1)]
    assert not req.docs.exists() and not req.stories.exists() and not (tmp_path / "remotes").exists()
    assert set(req.artifacts.values_list("kind", flat=True)) <= {"status_digest"}  # the PM's digest, nothing built


@pytest.mark.django_db(transaction=True)
def test_a_one_line_brief_runs_on_a_cassette_recorded_for_it_and_is_titled_by_its_first_sentence(settings, tmp_path):
    """The sample's answers, recorded (here: re-pinned) for a one-line reading-list brief: a brief with no
    title line is taken whole, and the cassette answers it because it recorded it."""
    settings.AITEAM_REPLAY_CASSETTE = _cassette_recorded_for(ONE_LINE, tmp_path)
    settings.AITEAM_AUTONOMOUS = True
    settings.AITEAM_REMOTES_ROOT = tmp_path / "remotes"
    out = StringIO()
    call_command("aiteam_demo", brief=_file(tmp_path, ONE_LINE + "\n"), approve_deployment=True, stdout=out)
    req = Requirement.objects.get()
    assert (req.brief, req.state) == (ONE_LINE, "deployed")
    assert req.title == "A reading list CLI: add books with title and author, mark them read, list…"
    assert "--- Delivered: yes" in out.getvalue()


@pytest.mark.parametrize("text,title,brief", [
    ("# Reading list service\nWe want a list.\n", "Reading list service", "We want a list."),
    ("## Word counter  \n\n  Count words.  \n", "Word counter", "Count words."),
    ("Count words in a file. Ignore punctuation.\nPrint the total.", "Count words in a file",
     "Count words in a file. Ignore punctuation.\nPrint the total."),
    ("Why count words? Because editors ask.", "Why count words?", "Why count words? Because editors ask."),
    ("#\nCount words.", "Count words", "Count words."),
    ("  one line, no full stop  \n", "one line, no full stop", "one line, no full stop"),
    ("# Only a title\n", "Only a title", ""),
])
def test_a_brief_file_is_titled_by_its_title_line_or_else_its_first_sentence(text, title, brief):
    assert brief_from_text(text) == (title, brief)


def test_a_long_first_sentence_is_cut_at_a_word_for_the_title():
    title, _ = brief_from_text("word " * 40)
    assert len(title) <= 80 and title.endswith("word…")


@pytest.mark.parametrize("content,message", [
    (None, "no brief file {path}: give --brief a text file holding the brief"),
    ("", "the brief file {path} is empty: write what you want built in it"),
    ("  \n\n ", "the brief file {path} is empty"),
    ("# Word counter\n\n", "the brief file {path} holds only a title: write what you want built below it"),
    (b"\xff\xfe brief", "the brief file {path} is not UTF-8 text: save it as UTF-8"),
])
def test_a_missing_empty_or_unreadable_brief_file_is_one_line_saying_what_to_do(tmp_path, content, message):
    path = tmp_path / "brief.md"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(CommandError) as caught:
        call_command("aiteam_demo", brief=path, stdout=StringIO())
    assert str(caught.value).startswith(message.format(path=path)) and "\n" not in str(caught.value)


def test_the_demo_help_says_what_the_brief_file_holds():
    text = " ".join(Demo().create_parser("manage.py", "aiteam_demo").format_help().split())
    assert "--brief FILE a UTF-8 text file holding the brief: what you want built, in plain words" in text
    assert "A first line '# Title' names it (optional: otherwise the title is the brief's first sentence)" in text
    assert "the replay provider answers only briefs its cassette recorded" in text


@pytest.mark.django_db
@pytest.mark.parametrize("options,message", [
    ({"org": "", "username": "alice"}, "--org '' is not a slug"),
    ({"org": "acme corp", "username": "alice"}, "--org 'acme corp' is not a slug: use letters, digits, hyphens"),
    ({"org": "acme", "username": "alice", "project": "web site"}, "--project 'web site' is not a slug"),
    ({"org": "acme", "username": "al ice"}, "--username 'al ice': Enter a valid username."),
    ({"org": "acme", "username": ""}, "--username '': This field cannot be blank."),
])
def test_aiteam_user_refuses_a_bad_name_in_one_line_and_creates_nothing(options, message):
    with pytest.raises(CommandError) as caught:
        call_command("aiteam_user", role="admin", stdout=StringIO(), **options)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert not Membership.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("args,message", [
    (["not-an-id"], "argument requirement_id: 'not-an-id' is not a requirement id: give its UUID"),
    ([str(uuid.UUID(int=7)), "--timeout", "-1"], "argument --timeout: '-1' is not a number of seconds above 0"),
    ([str(uuid.UUID(int=7))], f"no requirement {uuid.UUID(int=7)}: give the id of one the admin or"),
])
def test_aiteam_replay_says_what_a_bad_argument_or_an_unknown_requirement_should_be(args, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        call_command("aiteam_replay", *args, stdout=StringIO())


def _demo_in_a_clean_state(var: Path, *options: str) -> subprocess.CompletedProcess:
    """`make demo` from a clean state, in a network namespace with no network at all where possible."""
    migrated = _manage(var, "migrate", "-v0")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    return _manage(var, "aiteam_demo", *options)


def _manage(var: Path, *args: str) -> subprocess.CompletedProcess:
    """manage.py on the embedded default under `var`, offline: no key, an unroutable API, no network namespace."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "ANTHROPIC_API_KEY", "DJANGO_SETTINGS_MODULE"}}
    env |= {"AITEAM_VAR_DIR": str(var), "ANTHROPIC_BASE_URL": "http://192.0.2.1:9"}  # unroutable if ever used
    isolate = ["unshare", "-n"] if shutil.which("unshare") and _unshare_works() else []
    return subprocess.run([*isolate, sys.executable, "manage.py", *args], env=env, cwd=settings.BASE_DIR,
                          capture_output=True, text=True, timeout=180)


def _file(directory: Path, text: str) -> Path:
    path = directory / "brief.md"
    path.write_text(text, encoding="utf-8")
    return path


def _cassette_recorded_for(brief: str, directory: Path) -> Path:
    """The sample cassette with its answers to the sample brief recorded for `brief` instead."""
    data = json.loads((Path(settings.BASE_DIR) / "agents/cassettes/sample.json").read_text())
    for interaction in data["interactions"]:
        if interaction["recorded_for"] == {"brief": SAMPLE}:
            interaction["recorded_for"] = {"brief": brief}
    path = directory / "one_line.json"
    path.write_text(json.dumps(data))
    return path


def _unshare_works() -> bool:
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
