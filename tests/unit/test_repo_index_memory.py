"""The index reads a commit's files as git streams them: one blob in memory at a time, each blob once however many
paths hold it, and a commit with more text than the index's limit refused saying so (agents/repo/files.py)."""
from __future__ import annotations

import subprocess
import tracemalloc
from pathlib import Path

import pytest

from agents.repo import IndexTooLarge, index_repository
from agents.repo import files as files_module
from agents.repo.index import build_index
from lifecycle.failure_rules import Failure, Route, Source, classify, error_classes
from tests.repo_sample import GIT_ENV

BLOB = b"".join(b"row %06d, a generated table that fills the file\n" % k for k in range(10_000))  # 500 KB
SOURCE = b"".join(b"RATE_%06d = %06d  # a generated table of rates\n" % (k, k) for k in range(10_000))  # 480 KB


def _git(repo: Path, *args: str, data: bytes | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env=GIT_ENV, input=data, check=True,
                          capture_output=True).stdout.decode().strip()


def _one_blob_at(tmp_path: Path, paths: int, data: bytes = BLOB, suffix: str = "csv") -> tuple[Path, str]:
    """A commit of `paths` files that are all one 500 KB blob, as `git mktree` writes it (no 150 MB on disk)."""
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", str(repo))
    blob = _git(repo, "hash-object", "-w", "--stdin", data=data)
    small = _git(repo, "hash-object", "-w", "--stdin", data=b"def table():\n    return 1\n")
    listing = "".join(f"100644 blob {blob}\tpart_{k:04d}.{suffix}\n" for k in range(paths))
    tree = _git(repo, "mktree", data=(listing + f"100644 blob {small}\ttable.py\n").encode())
    return repo, _git(repo, "commit-tree", tree, "-m", "Generated tables")


def test_a_blob_many_paths_hold_is_read_once_and_never_all_at_once(tmp_path, monkeypatch):
    # one git cat-file answer read whole: 300 paths of one 500 KB blob held 150 MB (2,000 of them, 2 GB of RSS)
    repo, commit = _one_blob_at(tmp_path, paths=300)  # not Python: the limit counts what the index keeps
    asked: list[list[str]] = []
    real = files_module.cat_blobs
    monkeypatch.setattr(files_module, "cat_blobs", lambda root, blobs: asked.append(blobs) or real(root, blobs))
    tracemalloc.start()
    try:
        index = build_index(repo, commit, max_total_bytes=1024**2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert len(index.files) == 301 and [f.path for f in index.files][:2] == ["part_0000.csv", "part_0001.csv"]
    assert index.files[-1].path == "table.py" and index.symbols_by_path["table.py"][0].name == "table"
    assert [len(blobs) for blobs in asked] == [2]
    assert peak < 20 * 1024**2, f"{peak / 1024**2:.0f} MB"


def test_a_commit_with_more_python_than_the_limit_is_refused_naming_it_and_routed_to_a_person(tmp_path, monkeypatch):
    repo, commit = _one_blob_at(tmp_path, paths=3, data=SOURCE, suffix="py")

    asked: list[list[str]] = []
    monkeypatch.setattr(files_module, "cat_blobs", lambda root, blobs: asked.append(blobs) or iter(()))

    with pytest.raises(IndexTooLarge, match=r"more than 1 MiB of Python source .*AITEAM_REPO_INDEX_MAX_MB") as refused:
        index_repository(repo, tmp_path / "cache", rev=commit, max_total_bytes=1024**2)

    assert asked == []  # refused from the listing's sizes: nothing read, nothing parsed
    monkeypatch.undo()
    routing = classify(Failure(Source.STEP, "tl_localize", error_classes(refused.value)))
    assert (routing.route, routing.first) == (Route.HUMAN, "repository_unusable")
    assert not list((tmp_path / "cache").glob("*.json"))
    assert len(index_repository(repo, tmp_path / "cache", rev=commit, max_total_bytes=2 * 1024**2).files) == 4
