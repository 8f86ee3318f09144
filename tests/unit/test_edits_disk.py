"""An answer read from a real working tree and its diff applied by real git: the diff `git apply` takes gives the
same files `apply_edits` wrote, and no symbolic link lets an answer read or write outside the tree."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agents.edits import Unreadable, apply_edits, named_paths, read_files, unified_diff
from agents.schemas.edits import EditsOutput

TREE = {
    "app/crlf.py": b"def f():\r\n    return 1\r\n\r\n\r\ndef g():\r\n    return 2\r\n",
    "app/tail.txt": b"first\nsecond\nlast line without newline",
    "app/old.py": b"OLD = True\n",
    "app/keep.py": b"x = 1\n",
}
ANSWER = EditsOutput.model_validate({"reasoning": "r", "deleted": ["app/old.py"], "edits": [
    {"path": "app/crlf.py", "search": "def g():\n    return 2\n", "replace": "def g():\n    return 3\n"},
    {"path": "app/tail.txt", "search": "last line without newline", "replace": "last line, changed"},
    {"path": "app/crlf.py", "search": "    return 1", "replace": "    return 10"},
], "files": [{"path": "app/new.py", "content": "NEW = 1\n"}, {"path": "app/empty.txt", "content": ""}]})


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=root,
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for path, data in TREE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def test_git_applies_the_diff_to_the_same_files_apply_edits_gives(repo: Path):
    before = read_files(repo, named_paths(ANSWER))
    assert set(before) == {"app/crlf.py", "app/tail.txt", "app/old.py"}  # new files do not exist yet
    applied = apply_edits(before, ANSWER)
    assert applied.ok
    patch = unified_diff(before, applied)
    assert "\\ No newline at end of file\n" in patch and "+++ /dev/null" in patch and "--- /dev/null" in patch
    git(repo, "apply", "--whitespace=nowarn", input_file(repo, patch))
    for path, data in applied.changed.items():
        assert (repo / path).read_bytes() == data, path
    assert not (repo / "app/old.py").exists()
    assert applied.changed["app/crlf.py"] == b"def f():\r\n    return 10\r\n\r\n\r\ndef g():\r\n    return 3\r\n"
    assert git(repo, "status", "--porcelain").split("\n").count(" M app/crlf.py") == 1


def input_file(repo: Path, patch: str) -> str:
    path = repo.parent / "answer.patch"
    path.write_bytes(patch.encode("utf-8"))  # bytes: a CRLF line of the patch must reach git as it is
    return str(path)


def test_a_symbolic_link_is_neither_read_through_nor_replaced(repo: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_bytes(b"TOKEN = 'x'\n")
    (repo / "app/link.py").symlink_to(outside / "secret.py")
    (repo / "linked").symlink_to(outside)
    found = read_files(repo, ["app/link.py", "linked/secret.py", "app", "app/missing.py"])
    assert found == {"app/link.py": Unreadable("a symbolic link"), "linked/secret.py": Unreadable("under a symbolic link"),
                     "app": Unreadable("a directory")}
    answer = EditsOutput.model_validate({"reasoning": "r", "files": [{"path": "linked/secret.py", "content": "x = 1\n"}],
                                         "edits": [{"path": "app/link.py", "search": "TOKEN = 'x'", "replace": "T = 1"}]})
    problems = apply_edits(found, answer).problems
    assert [p.message for p in problems] == ["block 1: app/link.py is a symbolic link; it cannot be edited",
                                             "linked/secret.py is under a symbolic link; it cannot be written"]
