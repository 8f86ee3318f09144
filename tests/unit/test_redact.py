"""What `redact` masks (keys of Anthropic, GitHub, GitLab) and what it leaves alone; `recorded` also drops NULs,
in keys too; `typed` (what people type, the assistant's answers) masks aiteam's own API tokens as well."""
from __future__ import annotations

import secrets

import pytest

from agents.llm.redact import MASK, recorded, redact, typed
from lifecycle.models.tokens import new_secret


@pytest.mark.parametrize("key", [
    "sk-ant-api03-" + "A" * 40, "ghp_" + "a1B2" * 9, "gho_" + "Z9" * 18, "ghs_" + "x" * 36,
    "github_pat_11ABCDEFG0123456789_" + "abcDEF123" * 6, "glpat-" + "x9Y8_" * 4, "glpat-" + "a1" * 13 + ".01.0z1abc2de",
    "xoxb-1234567890-1234567890123-" + "AbCd" * 6,
])
def test_a_prefixed_key_is_masked_wherever_it_stands(key):
    for text in (key, f"my key is {key}.", f'{{"token": "{key}"}}', f"Token {key}\n"):
        assert key not in redact(text) and MASK in redact(text)


def test_every_api_token_aiteam_issues_is_masked_in_a_sentence_a_person_typed():
    tokens = [new_secret() for _ in range(2000)]
    assert [t for t in tokens if t in typed(f"my token is {t}, and 'Token {t}'.")] == []


def test_the_pipelines_calls_keep_a_name_shaped_like_a_token_so_a_replay_gets_back_what_was_answered():
    code = "class ParsesTheLedgerIntoMonthlyTotalsPerClientXY:\n    pass\n"  # a 43-character name
    assert recorded({"content": code}) == {"content": code} and MASK in typed(code)


@pytest.mark.parametrize("text", [
    "33d68186-1035-4f6c-9256-dd90f440edf2",  # an id
    "9f2c" * 10, "0123456789abcdef" * 3,  # a commit, a digest in hex
    "test_a_submitter_may_approve_the_cancel_of",  # an identifier: one case only
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0." + "Ab1_" * 10 + "Ab1",  # a JWT's signature
    "digest: " + "Ab12" * 10 + "Ab1=", "src/" + "Ab1_" * 10 + "Ab1",  # base64 with its padding, a path
    "Ab1_" * 11,  # 44 characters: not a token's length
])
def test_what_only_resembles_a_token_is_left_alone(text):
    assert redact(text) == text and typed(text) == text


def test_recorded_masks_and_drops_nul_in_values_and_keys_of_nested_json():
    key = "sk-ant-" + secrets.token_hex(8)
    assert recorded({"a\x00b": ["c\x00", 1, None, {"k": f"x {key}"}], "n": 2.5}) == {
        "ab": ["c", 1, None, {"k": f"x {MASK}"}], "n": 2.5}
    assert redact({"a\x00": "b\x00"}) == {"a\x00": "b\x00"}  # redact alone masks secrets only
