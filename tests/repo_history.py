"""A project's repository with history for the mirror and workspace tests: a src-layout shop package built in four
commits on `main`, with a CRLF file and a binary one, served as a bare repository under an operator's local root
(`<root>/<org>/<project>.git`, the only local remote the operator's rule allows)."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from agents.delivery.remotes import Remote
from agents.repo.mirror import Mirror
from agents.repo.refs import branch_name
from agents.repo.workspace import RepoWorkspace

ENV = {"GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@localhost", "GIT_COMMITTER_NAME": "dev",
       "GIT_COMMITTER_EMAIL": "dev@localhost", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
       "PATH": "/usr/bin:/bin"}
OWN_PATH = "org-1/project-1.git"

COMMITS = [
    ("Start the shop", {
        "pyproject.toml": b'[project]\nname = "shop"\nversion = "0.1"\n',
        "src/shop/__init__.py": b"",
        "src/shop/cart.py": b"def total(prices):\n    return sum(prices)\n",
        "tests/test_cart.py": b"from shop.cart import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
    }),
    ("Add discounts", {
        "src/shop/discount.py": b"def apply(total, percent):\n    return total * (100 - percent) // 100\n",
        "docs/windows.txt": b"line one\r\nline two\r\nline three\r\n",
    }),
    ("Add a logo", {"assets/logo.bin": bytes(range(256)) * 4}),
    ("Round totals", {"src/shop/cart.py": b"def total(prices):\n    return round(sum(prices), 2)\n"}),
]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout


def commit_files(work: Path, message: str, files: dict[str, bytes]) -> str:
    for path, data in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_bytes(data)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    return git(work, "rev-parse", "HEAD").strip()


@dataclass
class Project:
    root: Path  # the operator's local root
    origin: Path  # the bare repository: the project's repo_url
    work: Path  # a developer's clone, to move main or the delivered branch behind our back

    @property
    def remote(self) -> Remote:
        return Remote(str(self.origin), local_root=self.root, own_path=OWN_PATH)

    def mirror(self, tmp: Path) -> Mirror:
        return Mirror(tmp / "var" / "mirrors" / "project-1.git", self.remote)

    def workspace(self, tmp: Path, key: str = "#42", title: str = "Fix the total", **kwargs: str) -> RepoWorkspace:
        return RepoWorkspace.open(self.mirror(tmp), tmp / "workspaces" / key.strip("#"), branch=branch_name(key, title),
                                  base="main", **kwargs)

    def main(self) -> str:
        return git(self.origin, "rev-parse", "refs/heads/main").strip()

    def blob(self, ref: str, path: str) -> bytes:
        return subprocess.run(["git", "cat-file", "blob", f"{ref}:{path}"], cwd=self.origin, env=ENV, check=True,
                              capture_output=True).stdout

    def advance_main(self, message: str, files: dict[str, bytes]) -> str:
        git(self.work, "checkout", "-q", "main")
        sha = commit_files(self.work, message, files)
        git(self.work, "push", "-q", "origin", "main")
        return sha


def make_project(tmp: Path) -> Project:
    root = tmp / "remotes"
    origin, work = root / OWN_PATH, tmp / "dev"
    origin.parent.mkdir(parents=True)
    git(tmp, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp, "init", "-q", "-b", "main", str(work))
    for message, files in COMMITS:
        commit_files(work, message, files)
    git(work, "push", "-q", str(origin), "main")
    git(work, "remote", "add", "origin", str(origin))
    return Project(root, origin, work)
