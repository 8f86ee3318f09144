"""Lexical search over definitions: identifier-aware terms, BM25 scores, and the terms each hit matched."""
from __future__ import annotations

import pytest

from agents.repo import estimate_tokens, index_repository, search
from agents.repo.terms import terms
from tests.repo_sample import HUGE_LIMIT, make_sample_repo


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
