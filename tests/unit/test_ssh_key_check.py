"""A key bound in AITEAM_SSH_IDENTITIES that ssh could not use is said at start (`manage.py check`, and the log of
gunicorn and the workers), naming the entry and the file, never the key's content: not first at a fetch."""
from __future__ import annotations

import io
import logging
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from django.core.management import call_command

from agents.delivery.remotes import ssh_key_file_problem
from aiteam.startup import refuse_bad_settings

KEY_TEXT = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAnotarealkey\n"


def key_file(folder: Path, name: str, mode: int = 0o600) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(KEY_TEXT)
    path.chmod(mode)
    return path


def check_output() -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("check", stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def problem_as_another_user(path: Path) -> str:
    """ssh_key_file_problem in a child process run as a user that does not own `path` (root reads every file, so
    the tests, run as root, drop to nobody there)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            os.write(write, str(ssh_key_file_problem(path)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as answer:
        return answer.read()


def test_a_missing_key_is_a_warning_naming_the_entry_and_the_file(settings, tmp_path):
    good = key_file(tmp_path / "keys", "globex")
    settings.AITEAM_SSH_IDENTITIES = {"acme": tmp_path / "keys" / "acme", "globex": good}

    output = check_output()

    assert f"(aiteam.W003) AITEAM_SSH_IDENTITIES: acme={tmp_path}/keys/acme: the key file does not exist" in output
    assert "ssh remotes of organization 'acme' fail until it is fixed" in output
    assert "globex" not in output and KEY_TEXT.splitlines()[1] not in output


def test_a_key_ssh_would_refuse_is_named_with_why(settings, tmp_path):
    open_key = key_file(tmp_path / "keys", "acme", mode=0o644)  # ssh refuses a private key others may read
    (tmp_path / "keys" / "globex").mkdir()
    settings.AITEAM_SSH_IDENTITIES = {"acme": open_key, "globex": tmp_path / "keys" / "globex"}

    output = check_output()

    assert f"acme={open_key}: the key file may be read or written by others (mode 644), so ssh refuses it" in output
    assert f"globex={tmp_path}/keys/globex: the key file is not a file" in output
    assert KEY_TEXT.splitlines()[1] not in output


def test_a_key_the_workers_user_cannot_read_or_reach_is_named():
    root = Path(tempfile.mkdtemp())  # pytest's tmp_path sits in a folder only its owner may enter
    root.chmod(0o755)
    try:
        unreadable = key_file(root / "keys", "acme", mode=0o000)
        hidden = key_file(root / "closed", "globex")
        (root / "closed").chmod(0o000)
        assert problem_as_another_user(unreadable) == "is not readable by this process's user"
        assert problem_as_another_user(hidden) == "cannot be reached (Permission denied)"
        assert problem_as_another_user(root / "keys" / "none") == "does not exist"
    finally:
        (root / "closed").chmod(0o700)
        shutil.rmtree(root)


def test_a_worker_starts_with_a_missing_key_and_logs_the_warning(settings, tmp_path, caplog):
    settings.AITEAM_SSH_IDENTITIES = {"acme": tmp_path / "acme_ed25519"}
    caplog.set_level(logging.WARNING, logger="aiteam.startup")

    refuse_bad_settings()  # the other organizations' work goes on

    assert f"aiteam.W003) AITEAM_SSH_IDENTITIES: acme={tmp_path}/acme_ed25519: the key file does not exist" in caplog.text


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_private_key_only_its_owner_reads_passes(settings, tmp_path, mode):
    settings.AITEAM_SSH_IDENTITIES = {"acme": key_file(tmp_path, "acme", mode=mode)}

    assert "aiteam.W003" not in check_output()
