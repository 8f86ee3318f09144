"""The repository index: what it reads of a commit, what it leaves out and why, and its cache by commit SHA."""
from __future__ import annotations

import pytest

from agents.repo import RepoIndexError, index_repository
from agents.repo import index as index_module
from tests.repo_sample import HUGE_LIMIT, SECRET, git, make_sample_repo


@pytest.fixture
def repo(tmp_path):
    return make_sample_repo(tmp_path)


def build(repo, tmp_path, **kwargs):
    return index_repository(repo, tmp_path / "cache", max_file_bytes=HUGE_LIMIT, **kwargs)


def test_it_indexes_classes_functions_and_methods_with_line_ranges_and_signatures(repo, tmp_path):
    index = build(repo, tmp_path)
    models = {s.qualname: s for s in index.symbols_by_path["shop/models.py"]}
    assert sorted(models) == ["LineItem", "LineItem.__init__", "LineItem.amount", "Order", "Order.__init__",
                              "Order.total", "order_total"]
    assert (models["Order"].kind, models["Order"].line, models["Order"].end_line) == ("class", 4, 11)
    assert (models["Order.total"].kind, models["Order.total"].line) == ("method", 10)
    assert models["order_total"].kind == "function"
    assert models["order_total"].signature == "def order_total(order: Order) -> int:"
    assert index.references["shop/views.py"]["render_invoice"] == 2


def test_binary_huge_symlinked_ignored_and_untracked_files_stay_out_with_reasons(repo, tmp_path):
    index = build(repo, tmp_path)
    assert {(s.path, s.reason) for s in index.skipped} == {
        ("logo.png", "binary"), ("data/huge.py", "too large"), ("link.py", "symlink")}
    assert not {"build/junk.py", "untracked.py", "logo.png", "data/huge.py", "link.py"} & index.paths
    names = {s.name for s in index.symbols}
    assert not {"huge_function", "ignored_junk", "not_committed", SECRET} & names


def test_nothing_from_outside_the_repository_reaches_the_index_through_a_symlink(repo, tmp_path):
    index = build(repo, tmp_path)
    everything = repr(index.symbols) + repr(index.references) + repr(index.files)
    assert SECRET not in everything and SECRET.lower() not in everything


def test_a_python_file_that_does_not_parse_is_listed_without_definitions(repo, tmp_path):
    index = build(repo, tmp_path)
    broken = next(f for f in index.files if f.path == "shop/broken.py")
    assert broken.python and not broken.parsed
    assert "shop/broken.py" not in index.symbols_by_path


def test_the_index_describes_the_commit_not_the_dirty_working_tree(repo, tmp_path):
    (repo / "shop/models.py").write_text("def uncommitted_edit():\n    pass\n")
    index = build(repo, tmp_path)
    assert "Order" in {s.name for s in index.symbols}
    assert "uncommitted_edit" not in {s.name for s in index.symbols}


def test_an_older_revision_is_indexed_as_it_was(repo, tmp_path):
    first = git(repo, "rev-parse", "HEAD~1")
    old, new = build(repo, tmp_path, rev=first), build(repo, tmp_path)
    assert old.sha == first and new.sha != first
    assert "free_shipping" not in {s.name for s in old.symbols}
    assert "free_shipping" in {s.name for s in new.symbols}


def test_the_same_commit_twice_is_a_load_not_a_rebuild(repo, tmp_path, monkeypatch):
    first = build(repo, tmp_path)
    assert not first.from_cache
    monkeypatch.setattr(index_module, "build_index", lambda *a, **k: pytest.fail("rebuilt a cached commit"))
    second = build(repo, tmp_path)
    assert second.from_cache
    assert (second.sha, second.symbols, second.files, second.references, second.skipped) == (
        first.sha, first.symbols, first.files, first.references, first.skipped)
    assert list((tmp_path / "cache").iterdir()) == [tmp_path / "cache" / f"repo-index-v1-{first.sha}-{HUGE_LIMIT}.json"]


def test_a_new_commit_is_indexed_afresh(repo, tmp_path):
    before = build(repo, tmp_path)
    (repo / "shop/refunds.py").write_text("def refund_order(order):\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "refunds")
    after = build(repo, tmp_path)
    assert after.sha != before.sha and not after.from_cache
    assert "refund_order" in {s.name for s in after.symbols}


def test_a_truncated_cache_file_is_rebuilt_over_not_trusted(repo, tmp_path):
    first = build(repo, tmp_path)
    cache = next((tmp_path / "cache").iterdir())
    cache.write_text(cache.read_text()[:100])
    again = build(repo, tmp_path)
    assert not again.from_cache and again.symbols == first.symbols
    assert build(repo, tmp_path).from_cache


@pytest.mark.parametrize("rev", ["no-such-branch", "--output=/tmp/x", "HEAD~99"])
def test_a_revision_that_is_not_a_commit_is_a_clear_error(repo, tmp_path, rev):
    with pytest.raises(RepoIndexError, match="not a revision|does not name a commit"):
        build(repo, tmp_path, rev=rev)


def test_a_directory_that_is_not_a_repository_is_a_clear_error(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(RepoIndexError, match="not a git repository"):
        index_repository(tmp_path / "plain", tmp_path / "cache")
    with pytest.raises(RepoIndexError, match="not a directory"):
        index_repository(tmp_path / "missing", tmp_path / "cache")



def test_a_git_dir_in_the_environment_does_not_redirect_the_index(repo, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    (other / "decoy.py").write_text("def decoy():\n    pass\n")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "decoy")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    index = build(repo, tmp_path)
    assert "Order" in {s.name for s in index.symbols} and "decoy" not in {s.name for s in index.symbols}


@pytest.mark.parametrize("limit", [0, -5, 1.5, None])
def test_a_size_limit_that_is_not_a_positive_number_of_bytes_is_refused(repo, tmp_path, limit):
    with pytest.raises(ValueError, match="max_file_bytes"):
        index_repository(repo, tmp_path / "cache", max_file_bytes=limit)
