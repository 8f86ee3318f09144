"""The base commit's tree as the runs at the base commit see it (agents/environments/export.py): written by git, the
commit's files byte for byte, and nothing ever written outside the destination, whatever the tree holds."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from agents.environments.export import export_commit
from tests.repo_history import ENV, commit_files, git


def _git(repo: Path, *args: str, data: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=ENV, input=data, check=True,
                          capture_output=True).stdout.decode().strip()


def _tree(repo: Path, entries: list[tuple[str, str, bytes | str]]) -> str:
    """A tree from (mode, name, content or subtree id) entries, as `git mktree` takes them (duplicates too)."""
    lines = []
    for mode, name, content in entries:
        if mode == "040000":
            lines.append(f"040000 tree {content}\t{name}\n")
        else:
            lines.append(f"{mode} blob {_git(repo, 'hash-object', '-w', '--stdin', data=content)}\t{name}\n")
    return _git(repo, "mktree", data="".join(lines).encode())


def _hostile_commit(repo: Path, outside: Path, depth: int) -> str:
    """A tree whose export by `git archive` and tarfile's data filter (Python before 3.11.13, CVE-2025-4517) wrote
    `outside/pwned.txt`: links through 247-character directories make the filter's realpath give up past PATH_MAX,
    and a link `e` beside a directory `e` gives the short path the extraction really follows."""
    long_name, steps = "d" * 247, "efghijklmnopqrst"
    inner = _tree(repo, [("100644", "keep", b"x\n")])
    for step in reversed(steps[1:]):
        inner = _tree(repo, [("040000", long_name, inner), ("120000", step, long_name.encode())])
    chain = _tree(repo, [("120000", "l" * 254, b"../" * len(steps))])
    for step in reversed(steps[1:]):
        chain = _tree(repo, [("040000", step, chain)])
    escape = "/".join(steps) + "/" + "l" * 254 + "/.." + "/.." * depth + str(outside)
    payload = _tree(repo, [("100644", "pwned.txt", b"written by the base commit\n")])
    top = _tree(repo, [("040000", long_name, inner), ("120000", "e", long_name.encode()), ("040000", "e", chain),
                       ("120000", "escape", escape.encode()), ("040000", "escape", payload),
                       ("100644", "test_ok.py", b"def test_ok():\n    assert True\n")])
    return _git(repo, "commit-tree", top, "-m", "hostile")


def _files(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file and link under root: its bytes (a link's target) and whether it is a link or executable."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(root))] = (os.readlink(path).encode(), True)
        elif path.is_file():
            found[str(path.relative_to(root))] = (path.read_bytes(), os.access(path, os.X_OK))
    return found


def test_a_tree_with_a_link_and_a_directory_of_one_name_writes_nothing_outside_the_export(tmp_path):
    repo, outside, dest = tmp_path / "repo", tmp_path / "outside", tmp_path / "scratch" / "with-qc-tests"
    _git(tmp_path, "init", "-q", str(repo))
    outside.mkdir()
    hostile = _hostile_commit(repo, outside, depth=len(dest.parts) + 4)

    tree = export_commit(repo, hostile, dest, {"test_bug.py": b"def test_bug(): pass\n"})

    assert list(outside.iterdir()) == []
    assert (tree / "test_ok.py").is_file() and (tree / "test_bug.py").is_file()
    assert all(tree in Path(os.path.realpath(path)).parents or path.is_symlink() for path in tree.rglob("*")
               if path.is_file())


def test_the_export_is_the_commits_tree_byte_for_byte_whatever_gitattributes_says_of_archives(tmp_path):
    # export-ignore used to drop the conftest (QC's reproduction then errored at base: "reproduced"), export-subst
    # to rewrite the version file
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    files = {".gitattributes": b"tests/conftest.py export-ignore\nsrc/version.py export-subst\n",
             "tests/conftest.py": b"import pytest\n", "src/version.py": b'commit = "$Format:%H$"\n',
             "tests/test_calc.py": b"def test_calc(): pass\n", "run.sh": b"#!/bin/sh\nexit 0\n"}
    (repo / "run.sh").write_bytes(b"")
    (repo / "run.sh").chmod(0o755)
    (repo / "docs").mkdir()
    (repo / "docs" / "version").symlink_to("../src/version.py")
    base = commit_files(repo, "base", files)
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(repo), str(checkout))

    tree = export_commit(repo, base, tmp_path / "tree")

    assert _files(tree) == {path: entry for path, entry in _files(checkout).items() if not path.startswith(".git/")}
    assert (tree / "tests/conftest.py").read_bytes() == b"import pytest\n"
    assert (tree / "src/version.py").read_bytes() == b'commit = "$Format:%H$"\n'
    assert (tree / "docs/version").is_symlink() and os.access(tree / "run.sh", os.X_OK)


def test_a_link_up_past_the_root_through_another_link_is_left_out_and_named(tmp_path):
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "here").symlink_to(".")
    (repo / "parent").symlink_to("here/..")  # lexically ".", but the directory above the tree's root
    (repo / "same").symlink_to("here/calc.py")
    base = commit_files(repo, "base", {"calc.py": b"one\n"})
    skipped: list[str] = []

    tree = export_commit(repo, base, tmp_path / "tree", {"tests/test_bug.py": b""}, skipped=skipped)

    assert skipped == ["parent"] and not (tree / "parent").is_symlink()
    assert (tree / "same").read_bytes() == b"one\n" and (tree / "tests/test_bug.py").is_file()
