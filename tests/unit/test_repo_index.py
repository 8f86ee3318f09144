"""The repository index: what it reads of a commit, what it leaves out and why, and its cache by commit SHA."""
from __future__ import annotations

import json
import os

import pytest

from agents.prompts import framed
from agents.repo import RepoIndexError, index_repository, repo_map, search
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


@pytest.mark.parametrize("generated", [
    'TABLE = ' + ' + '.join(['"a"'] * 3000) + '\n',  # RecursionError while the tree is built
    'x = ' + '-' * 10_000 + '1\n',  # MemoryError: the parser's stack
    'def f(x=' + ' + '.join(['1'] * 900) + '):\n    pass\n',  # parses; RecursionError unparsing the signature
])
def test_a_file_nested_too_deep_to_parse_is_listed_without_definitions_like_a_broken_one(repo, tmp_path, generated):
    (repo / "shop/generated.py").write_text(generated)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Generate a table")

    index = index_repository(repo, tmp_path / "cache")  # the default size limit: the files are 10 to 20 KB

    deep = next(f for f in index.files if f.path == "shop/generated.py")
    assert deep.python and not deep.parsed and "shop/generated.py" not in index.symbols_by_path
    assert "Order" in index.definers and "shop/models.py" in index.symbols_by_path


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
    name = f"repo-index-v{index_module.FORMAT}-{first.sha}-{HUGE_LIMIT}.json"
    assert list((tmp_path / "cache").iterdir()) == [tmp_path / "cache" / name]


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


def commit_odd_names(repo):
    """A name that is not UTF-8 (Latin-1 `café.py`), one with a newline, one with a NUL past git's 8,000 bytes
    sniff, and a submodule entry: what a real repository may hold."""
    (repo / os.fsdecode(b"caf\xe9.py")).write_text("def cafe_order():\n    pass\n")
    (repo / "notes\nforged.py").write_text("def forged():\n    pass\n")
    (repo / "late_nul.py").write_bytes(b"def late():\n    pass\n" + b"#" * 9000 + b"\0\n")
    git(repo, "add", "-A")
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{sha},vendor/lib")
    git(repo, "commit", "-q", "-m", "odd names")


def build_odd(repo, tmp_path):
    return index_repository(repo, tmp_path / "cache", max_file_bytes=64 * 1024)  # the late NUL past 8,000 bytes


def test_a_name_that_cannot_travel_as_text_is_left_out_with_its_reason_shown_escaped(repo, tmp_path):
    commit_odd_names(repo)
    index = build_odd(repo, tmp_path)
    reasons = {s.path: s.reason for s in index.skipped}
    assert reasons["caf\\xe9.py"] == "name not UTF-8" and reasons["notes\\x0aforged.py"] == "name with a control character"
    assert reasons["late_nul.py"] == "binary" and reasons["vendor/lib"] == "submodule"
    assert not {"cafe_order", "forged", "late"} & {s.name for s in index.symbols}
    everything = [*index.paths, *(s.path for s in index.skipped), *(s.path for s in index.symbols)]
    assert all(p.encode("utf-8") and "\n" not in p for p in everything)  # no surrogate, no forged map line
    assert build_odd(repo, tmp_path).from_cache and build_odd(repo, tmp_path).skipped == index.skipped


def test_the_map_and_the_search_of_such_a_repository_reach_a_prompt(repo, tmp_path):
    commit_odd_names(repo)
    index = build_odd(repo, tmp_path)
    view = repo_map(index, 100_000, ticket="cafe_order in café.py fails")
    hits = search(index, "cafe_order forged late")
    data = json.dumps({"map": view.text, "hits": [h.path for h in hits]}, ensure_ascii=False)
    assert framed("localize", data).encode("utf-8")  # the step failed here: '\\udce9' ... surrogates not allowed
    assert "caf" not in view.text and "forged" not in view.text
    assert {h.path for h in hits} <= index.paths and not {"cafe_order", "forged", "late"} & {h.qualname for h in hits}


def test_the_files_note_says_how_many_files_were_left_out_and_why(repo, tmp_path):
    commit_odd_names(repo)
    index = build_odd(repo, tmp_path)
    assert index.files_note() == (
        f"the repository has {len(index.files) + 6} files, {len(index.files)} indexed, 6 left out: 2 binary, "
        "1 name not UTF-8, 1 name with a control character, 1 submodule, 1 symlink")
    assert "2 too large" in build(repo, tmp_path).files_note()  # huge.py and, past 4 KiB, late_nul.py
    assert "\n" not in index.files_note()
    plain = tmp_path / "plain"
    plain.mkdir()
    git(plain, "init", "-q")
    (plain / "a.py").write_text("def a():\n    pass\n")
    git(plain, "add", "-A")
    git(plain, "commit", "-q", "-m", "one file")
    assert index_repository(plain, tmp_path / "c2").files_note() == "the repository has 1 file, all indexed"


def test_a_cache_of_the_earlier_format_is_not_read(repo, tmp_path):
    first = build(repo, tmp_path)
    old = tmp_path / "cache" / f"repo-index-v1-{first.sha}-{HUGE_LIMIT}.json"
    old.write_text(json.dumps({"format": 1, "sha": first.sha, "files": [], "symbols": [], "references": {},
                               "skipped": []}))
    (tmp_path / "cache" / f"repo-index-v{index_module.FORMAT}-{first.sha}-{HUGE_LIMIT}.json").unlink()
    again = build(repo, tmp_path)
    assert not again.from_cache and again.files == first.files
