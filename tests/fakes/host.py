"""A local fake GitHub for `make ticket-demo`: one repository served over git's smart HTTP (https, git's own
http-backend behind a token check) and GitHub's REST API for its pull requests, on ports the OS picks: the two
things a run on an existing repository talks to when it delivers (docs/adr/0035). It runs around one command:

    python -m tests.fakes.host --repo var/sample-ticket-repo --as demo/textkit --root var/fake-github -- \\
        python manage.py aiteam_ticket --repo {git_url} --host github --api-url {api_url} --token-env {token_env} ...

The command's arguments equal to {git_url}, {api_url} or {token_env} are replaced by their values, and its
environment names this host the way an operator would: the token in the variable --token-env names (a demo-only
value, never printed: the one already in that variable, else a random one), AITEAM_TOKEN_ENVS naming that variable
alone, AITEAM_GIT_HOSTS=127.0.0.1, AITEAM_GITHUB_API_URLS the fake API, AITEAM_GIT_CA_FILE the host's throwaway
certificate. The host stops when the command ends, however it ends; the exit status is the command's.

The repository's branches, with their history, go to <root>/<owner>/<name>.git, kept between runs (a ticket run
again replaces its own branch under a lease on the commit it pushed last); the pull requests live in memory and are
written to <root>/pulls.json at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Self

from tests.fakes.git_http_server import GitHttpServer, self_signed
from tests.fakes.github_server import FakeGitHubServer
from tests.repo_history import git

GIT_USER = "x-access-token"  # the user name GitHub expects beside a token (agents/delivery/credentials.py)
TOKEN_ENV = "AITEAM_DEMO_GITHUB_TOKEN"


class FakeGitHubHost:
    """`repository` ("owner/name") over https at `git_url` and its pulls API at `api_url`, both taking `token`."""

    def __init__(self, root: Path, repository: str, *, token: str) -> None:
        self.root, self.repository, self.token = Path(root).resolve(), repository, token
        self.root.mkdir(parents=True, exist_ok=True)
        self.cert, key = self_signed(self.root)
        self.git = GitHttpServer(self.root, self.cert, key, user=GIT_USER, token=token)
        self.api = FakeGitHubServer(token, html_url=self.git.url)  # github.com's pages sit beside its git URLs

    @property
    def bare(self) -> Path:
        return self.root / f"{self.repository}.git"

    @property
    def git_url(self) -> str:
        return f"{self.git.url}/{self.repository}.git"

    def publish(self, source: Path) -> None:
        """The source's branches, with their history, on the host; branches pushed here before are kept."""
        if not self.bare.exists():
            git(self.root, "init", "-q", "--bare", "-b", "main", str(self.bare))
        git(self.bare, "fetch", "-q", "--no-tags", str(Path(source).resolve()), "+refs/heads/*:refs/heads/*")

    def environment(self, token_env: str) -> dict[str, str]:
        """What an operator sets for a worker to deliver to this host."""
        return {token_env: self.token, "AITEAM_TOKEN_ENVS": token_env, "AITEAM_GIT_HOSTS": "127.0.0.1",
                "AITEAM_GITHUB_API_URLS": self.api.url, "AITEAM_GIT_CA_FILE": str(self.cert)}

    def __enter__(self) -> Self:
        self.git.start()
        self.api.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.api.stop()
        self.git.stop()
        (self.root / "pulls.json").write_text(json.dumps(list(self.api.pulls.values()), indent=2) + "\n")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    command = [a for a in args.command if a != "--"]
    if not command:
        raise SystemExit("give the command to run after --")
    token = os.environ.get(args.token_env) or f"ghp_demo{secrets.token_hex(16)}"
    with FakeGitHubHost(args.root, args.repository, token=token) as host:
        host.publish(args.repo)
        print(f"Fake GitHub on 127.0.0.1: git {host.git_url}, API {host.api.url} (token in ${args.token_env})",
              flush=True)
        values = {"{git_url}": host.git_url, "{api_url}": host.api.url, "{token_env}": args.token_env}
        done = subprocess.run([values.get(a, a) for a in command], env={**os.environ, **host.environment(args.token_env)},
                              check=False)
    for pull in host.api.pulls.values():
        print(f"Fake GitHub holds pull request #{pull['number']} on {pull['repo']} ({pull['state']}"
              f"{', draft' if pull['draft'] else ''}): {pull['head']['ref']} -> {pull['base']['ref']}")
    return done.returncode


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.host", description=(
        "Run COMMAND against a local fake GitHub serving --repo over https and the pulls API, its arguments "
        "{git_url}, {api_url}, {token_env} replaced; the host stops when COMMAND ends. See the module's docstring."))
    parser.add_argument("--repo", required=True, type=Path, help="the git repository whose branches the host serves")
    parser.add_argument("--as", dest="repository", default="demo/repository", metavar="OWNER/NAME",
                        help="the repository's name on the host")
    parser.add_argument("--root", required=True, type=Path, help="where the host keeps its repositories")
    parser.add_argument("--token-env", default=TOKEN_ENV, metavar="NAME", help="the token's variable")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command to run")
    return parser


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
