"""The host token reaches git through its environment and nowhere else: a real fetch and push over HTTPS against
git's own http-backend behind a token check (tests/fakes/git_http_server.py), with every git command line the
machine runs meanwhile read from /proc, the log records, the mirror's and workspace's git files and the
delivery's record searched for the token in every form."""
from __future__ import annotations

import base64
import logging
import os
import subprocess
import threading
from pathlib import Path

import pytest

from agents.delivery import DeliveryPlan, Remote, deliver
from agents.delivery.credentials import HostAuth, git_env
from agents.delivery.errors import DeliveryError
from agents.repo.mirror import Mirror, MirrorError
from agents.repo.refs import branch_name
from agents.repo.workspace import RepoWorkspace
from agents.schemas.edits import EditsOutput
from tests.fakes.git_http_server import GitHttpServer, self_signed
from tests.repo_history import COMMITS, commit_files, git

TOKEN = "ghp_TOKENvalue0123456789"
FORMS = (TOKEN, base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode())


class CommandLines:
    """Every process's command line seen while it runs: /proc/<pid>/cmdline is what `ps` shows any user."""

    def __init__(self) -> None:
        self.seen: set[bytes] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    try:
                        self.seen.add(Path(entry.path, "cmdline").read_bytes())
                    except OSError:
                        pass  # the process ended meanwhile

    def __enter__(self) -> CommandLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture
def host(tmp_path):
    root = tmp_path / "host"
    work = tmp_path / "dev"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(root / "shop.git"))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    for message, files in COMMITS:
        commit_files(work, message, files)
    git(work, "push", "-q", str(root / "shop.git"), "main")
    cert, key = self_signed(tmp_path)
    with GitHttpServer(root, cert, key, user="x-access-token", token=TOKEN) as server:
        server.cert = cert
        yield server


def remote(host: GitHttpServer) -> Remote:
    return Remote(f"{host.url}/shop.git", hosts=("127.0.0.1",))


def wrap_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that records its arguments, then runs the real one."""
    log, bin_dir = tmp_path / "argv.log", tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec /usr/bin/git "$@"\n')
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return log


def git_files(*directories: Path) -> bytes:
    """Everything git wrote that is not a compressed object: config, FETCH_HEAD, refs, logs, packed-refs."""
    return b"".join(p.read_bytes() for d in directories for p in sorted(d.rglob("*"))
                    if p.is_file() and "objects" not in p.parts)


def assert_nowhere(*texts: bytes | str) -> None:
    for text in texts:
        data = text.encode() if isinstance(text, str) else text
        for form in FORMS:
            assert form.encode() not in data


def test_fetch_and_push_with_the_token_in_git_s_environment_only(host, tmp_path, monkeypatch, caplog):
    argv = wrap_git(tmp_path, monkeypatch)
    auth = HostAuth.for_host("github", TOKEN, ca_file=host.cert)
    caplog.set_level(logging.DEBUG)
    with CommandLines() as lines:
        mirror = Mirror(tmp_path / "mirrors" / "1.git", remote(host), auth)
        workspace = RepoWorkspace.open(mirror, tmp_path / "ws", branch=branch_name("#7", "round"), base="main")
        edit = {"path": "src/shop/cart.py", "search": "    return round(sum(prices), 2)\n", "replace": "    return 0\n"}
        assert workspace.apply(EditsOutput(reasoning="fix", edits=[edit])).ok
        workspace.commit("T1 (attempt 1)")
        result = deliver(DeliveryPlan(workspace=workspace.path, branch=workspace.branch, remote=remote(host),
                                      auth=auth))
    assert result.succeeded, result.error
    assert git(host.root / "shop.git", "merge-base", "main", workspace.branch).strip() == workspace.base_sha
    sent = [r for r in host.requests if r.authorization]
    assert sent and all(r.authorization == f"Basic {FORMS[1]}" for r in sent)  # the header carried it
    assert any("git-receive-pack" in r.path for r in sent)  # the push too, not only the fetch
    assert "ls-remote" in argv.read_text() and "fetch" in argv.read_text()  # the wrapper saw the calls it checks
    assert any(b"remote-https" in line for line in lines.seen)  # and the watch saw git's child that talks to the host
    assert_nowhere(argv.read_bytes(), b"\n".join(lines.seen), caplog.text, str(result.to_dict()),
                   "\n".join(r.path for r in host.requests), git_files(mirror.path, workspace.path / ".git"))


def test_without_the_token_the_host_says_no_at_once_and_the_error_says_why(host, tmp_path):
    mirror = Mirror(tmp_path / "mirrors" / "1.git", remote(host), HostAuth("wrong-token", ca_file=host.cert))
    with mirror.locked(), pytest.raises(MirrorError, match="failed .the host refused access: the project's token"):
        mirror.sync("main")  # GIT_TERMINAL_PROMPT=0: no prompt waits for a password


def test_a_host_with_a_certificate_nobody_vouched_for_is_refused(host, tmp_path):
    mirror = Mirror(tmp_path / "mirrors" / "1.git", remote(host), HostAuth(TOKEN))
    with mirror.locked(), pytest.raises(MirrorError, match="certificate"):
        mirror.sync("main")


def test_the_header_is_scoped_to_the_remote_s_host_and_redirects_are_off():
    env = git_env("https://git.example.com:8443/team/shop.git", HostAuth(TOKEN))
    assert env["GIT_CONFIG_KEY_0"] == "http.https://git.example.com:8443/.extraHeader"
    assert env["GIT_CONFIG_VALUE_0"] == f"Authorization: Basic {FORMS[1]}"
    assert (env["GIT_CONFIG_KEY_1"], env["GIT_CONFIG_VALUE_1"]) == ("http.followRedirects", "false")


@pytest.mark.parametrize("auth", [HostAuth(TOKEN), None])
def test_git_follows_no_redirect_with_a_token_or_without(host, auth):
    """ADR 31: a moved repository is an error, not a request to wherever the answer points, whether or not the
    remote has a token (a tokenless public repository is fetched under the same rule)."""
    host.moved["old.git"] = "shop.git"
    url = f"{host.url}/old.git"
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_TERMINAL_PROMPT": "0", "GIT_SSL_CAINFO": str(host.cert), **git_env(url, auth)}
    done = subprocess.run(["git", "ls-remote", "--heads", "--", url], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "error: 301" in done.stderr, done.stderr
    assert [r.path.split("/")[1] for r in host.requests] == ["old.git"]  # never the address it was sent to


@pytest.mark.parametrize("url", ["/srv/git/shop.git", "file:///srv/git/shop.git", "ssh://git@github.com/o/r.git",
                                 "git@github.com:o/r.git"])
def test_ssh_and_local_remotes_never_see_the_token(url):
    assert git_env(url, HostAuth(TOKEN)) == git_env(url, None) == {}


@pytest.mark.parametrize("token", ["", "two words", "line\nX-Injected: 1", "tab\there"])
def test_a_token_that_could_add_a_header_is_refused(token):
    with pytest.raises(DeliveryError, match="empty or holds whitespace"):
        HostAuth(token)


def test_the_token_is_kept_out_of_reprs_and_user_names_follow_the_host():
    auth = HostAuth.for_host("gitlab", TOKEN)
    assert TOKEN not in repr(auth) and auth.username == "oauth2"
    with pytest.raises(DeliveryError, match="unknown host kind"):
        HostAuth.for_host("bitbucket", TOKEN)
