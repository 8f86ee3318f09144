"""Lexical search over definitions: identifier-aware terms, BM25 scores, and the terms each hit matched."""
from __future__ import annotations

import pytest

from agents.repo import estimate_tokens, index_repository, repo_map, search
from agents.repo.terms import code_names, plain_words, terms
from tests.repo_sample import HUGE_LIMIT, git, make_sample_repo


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """One repository for the module: nothing here changes it, and building it per test was most of the time."""
    base = tmp_path_factory.mktemp("repo")
    return index_repository(make_sample_repo(base), base / "cache", max_file_bytes=HUGE_LIMIT)


def test_identifiers_are_cut_at_underscores_and_case_changes_and_kept_whole():
    assert terms("HttpResponseParser.parse_header_line") == [
        "http", "response", "parser", "httpresponseparser", "parse", "header", "line", "parse_header_line"]
    assert terms("the URLValidator of a") == ["url", "validator", "urlvalidator"]


def test_search_finds_a_method_by_the_words_of_its_split_name(index):
    hits = search(index, "parse header line")
    assert (hits[0].path, hits[0].qualname, hits[0].kind) == ("shop/utils/http_client.py",
                                                              "HttpResponseParser.parse_header_line", "method")
    assert hits[0].matched_terms == ("parse", "header", "line")
    assert hits[0].line == 4 and hits[0].score > 0


def test_search_finds_a_class_by_the_parts_of_its_camel_case_name(index):
    assert search(index, "http response")[0].qualname == "HttpResponseParser"


def test_the_exact_name_ranks_above_definitions_sharing_its_parts(index):
    hits = search(index, "order_total")
    assert hits[0].qualname == "order_total"
    assert "order_total" in hits[0].matched_terms
    assert {h.qualname for h in hits} > {"order_total"}  # the parts find the others too


def test_a_query_with_no_known_terms_finds_nothing(index):
    assert search(index, "zebra quantum") == []
    assert search(index, "") == []


def test_hits_are_best_first_and_within_the_limit(index):
    hits = search(index, "order total discount", limit=3)
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize("limit", [0, -1, 501, 2.0, True])
def test_a_limit_out_of_range_is_refused(index, limit):
    with pytest.raises(ValueError, match="search limit"):
        search(index, "order", limit=limit)


def test_a_whole_ticket_pasted_as_a_query_still_answers(index):
    assert search(index, "apply discount " + "x" * 100_000)[0].qualname == "apply_discount"


def test_the_token_estimate_counts_bytes_so_it_never_undercounts_non_ascii_text():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 1 and estimate_tokens("abcd") == 2
    assert estimate_tokens("é" * 3) == 2  # 6 bytes


@pytest.fixture(scope="module")
def toolkit(tmp_path_factory):
    """A package whose name is in every definition's path, one `groupby`, and many tests that raise TypeError: the
    shape of toolz's, where the ticket "toolkit.groupby(['a','b'], dicts) raises TypeError" found the tests first."""
    repo = tmp_path_factory.mktemp("toolkit")
    git(repo, "init", "-q")
    (repo / "toolkit").mkdir()
    (repo / "toolkit/itertoolkit.py").write_text(
        "def groupby(key, seq):\n    \"\"\"Group a collection by a key function.\"\"\"\n    out = {}\n"
        "    for item in seq:\n        out.setdefault(key(item), []).append(item)\n    return out\n\n\n"
        "def unique(seq, key=None):\n    return list(dict.fromkeys(seq))\n")
    tests = "from pytest import raises\n\nfrom toolkit.itertoolkit import groupby, unique\n"
    tests += "".join(f"\n\ndef test_case_{n}():\n    with raises(TypeError):\n        unique([[{n}]], key=list)\n"
                     if n % 2 else f"\n\ndef test_case_{n}():\n    assert unique([{n}]) == [{n}]\n" for n in range(30))
    (repo / "toolkit/test_itertoolkit.py").write_text(tests)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "toolkit")
    return index_repository(repo, repo / ".cache")


TOOLKIT_TICKET = ("groupby with a key list: toolkit.groupby(['a','b'], dicts) raises TypeError: unhashable type list."
                  " Expected: a list key groups by the tuple of those fields.")


def test_a_definition_the_ticket_names_as_code_comes_before_the_words_it_shares_with_tests(toolkit):
    hits = search(toolkit, TOOLKIT_TICKET)
    assert (hits[0].path, hits[0].qualname) == ("toolkit/itertoolkit.py", "groupby")
    assert hits[1].qualname.startswith("test_case_")  # the rest by their score: the tests share "raises TypeError"
    view = repo_map(toolkit, 60, ticket=TOOLKIT_TICKET)
    assert (view.entries[0].qualname, view.focus.identifiers) == ("groupby", {"groupby"})


def test_a_term_in_nearly_every_definition_weighs_nothing_and_is_not_listed_as_matched(toolkit):
    hits = search(toolkit, TOOLKIT_TICKET, limit=40)
    assert hits and not any("toolkit" in h.matched_terms for h in hits)  # in every path: it tells nothing apart
    assert search(toolkit, "toolkit") == []


def test_a_term_in_every_definition_of_a_small_index_still_counts(index):
    assert search(index, "shop")  # 'shop' is in every path here, but a dozen definitions are too few to tell


@pytest.mark.parametrize(("text", "code", "plain"), [
    ("toolz.groupby(['a','b'], dicts) raises TypeError", {"groupby", "TypeError"},
     {"toolz", "groupby", "dicts", "raises"}),
    ("IniConfig('x.ini').get('section')", {"IniConfig", "get", "ini"}, {"get", "ini", "section"}),
    ("len(TTLCache(maxsize=10)) counts `expire`", {"len", "TTLCache", "expire"}, {"len", "maxsize", "counts", "expire"}),
    ("see https://docs.python.org/3/library/os.html, then os.walk", {"walk"}, {"see", "walk"}),
])
def test_the_names_a_ticket_writes_as_code_and_its_plain_words(text, code, plain):
    assert code_names(text) == code  # a URL's parts are not code, nor its words
    assert plain_words(text) == plain
