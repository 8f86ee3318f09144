"""A bug in a flat package: slugify leaves runs of dashes (the bundled sample ticket)."""
from tests.ticket_corpus.base import Entry

PYPROJECT = """\
[project]
name = "textkit"
version = "0.3.0"
requires-python = ">=3.10"

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
SLUG_V1 = '''\
"""URL slugs."""


def slugify(text: str) -> str:
    """A URL-friendly form of text: lower case, words joined by '-'."""
    return text.strip().lower().replace(" ", "-")
'''
SLUG_V2 = '''\
"""URL slugs."""
import re


def slugify(text: str) -> str:
    """A URL-friendly form of text: lower case, punctuation dropped, words joined by '-'."""
    text = re.sub(r"[^a-z0-9\\s-]", "", text.strip().lower())
    return re.sub(r"\\s", "-", text)
'''
SLUG_TESTS = '''\
from textkit.slug import slugify


def test_spaces_become_dashes():
    assert slugify("Hello World") == "hello-world"


def test_punctuation_is_dropped():
    assert slugify("Hello, World!") == "hello-world"


def test_letters_are_lower_case():
    assert slugify("ABC") == "abc"
'''
TRUNCATE = '''\
"""Shortening text for previews."""


def truncate(text: str, width: int, ellipsis: str = "…") -> str:
    """text cut to at most `width` characters, at a word boundary when there is one, with `ellipsis` added."""
    if len(text) <= width:
        return text
    cut = text[: width - len(ellipsis)]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + ellipsis
'''
TRUNCATE_TESTS = '''\
from textkit.truncate import truncate


def test_short_text_is_kept():
    assert truncate("short", 10) == "short"


def test_long_text_is_cut_at_a_word():
    assert truncate("the quick brown fox", 12) == "the quick…"
'''

FIX = {
    "reasoning": "The last substitution turned each whitespace character into its own dash, so a run of spaces (or "
                 "a dash between spaces) became several dashes, and leading or trailing dashes stayed. One "
                 "substitution over runs of whitespace and dashes, then stripping dashes at the ends, fixes both.",
    "edits": [
        {"path": "textkit/slug.py",
         "search": '    return re.sub(r"\\s", "-", text)\n',
         "replace": '    return re.sub(r"[\\s-]+", "-", text).strip("-")\n'},
        {"path": "tests/test_slug.py",
         "search": 'def test_letters_are_lower_case():\n    assert slugify("ABC") == "abc"\n',
         "replace": 'def test_letters_are_lower_case():\n    assert slugify("ABC") == "abc"\n\n\n'
                    'def test_runs_of_spaces_and_dashes_become_one_dash():\n'
                    '    assert slugify("Hello,  World!") == "hello-world"\n'
                    '    assert slugify(" - Draft - ") == "draft"\n'},
    ],
}
QC = {
    "reasoning": "The ticket's two examples as written, through the public function: both fail before the fix.",
    "files": [{"path": "tests/acceptance/test_slug_dashes.py", "content": '''\
from textkit.slug import slugify


def test_double_spaces_give_one_dash():
    assert slugify("Hello,  World!") == "hello-world"


def test_no_dash_at_either_end():
    assert slugify(" - Draft - ") == "draft"
'''}],
    "coverage": {"AC-1": ["test_double_spaces_give_one_dash"], "AC-2": ["test_no_dash_at_either_end"]},
}
HIDDEN = {"tests/test_hidden_slug_dashes.py": '''\
from textkit.slug import slugify


def test_a_run_of_spaces_is_one_dash():
    assert slugify("a   b") == "a-b"


def test_a_dash_between_spaces_is_one_dash():
    assert slugify("before - after") == "before-after"


def test_dashes_at_the_ends_are_dropped():
    assert slugify("--x--") == "x"


def test_tabs_and_newlines_count_as_spaces():
    assert slugify("one\\t\\ntwo") == "one-two"
'''}

ENTRY = Entry(
    key="textkit-slug-dashes",
    kind="bug",
    title="slugify leaves double dashes",
    body="slugify(\"Hello,  World!\") returns \"hello--world\": two spaces (or a space after the comma we strip) "
         "give two dashes. \" - Draft - \" gives \"---draft---\". Expected: \"hello-world\" and \"draft\": a run "
         "of spaces and dashes is one dash, and a slug never starts or ends with a dash.",
    commits=(
        ("Start textkit with slugify", {"pyproject.toml": PYPROJECT, "textkit/__init__.py": "",
                                        "textkit/slug.py": SLUG_V1, "tests/test_slug.py": SLUG_TESTS}),
        ("Drop punctuation from slugs", {"textkit/slug.py": SLUG_V2}),
        ("Add truncate for previews", {"textkit/truncate.py": TRUNCATE, "tests/test_truncate.py": TRUNCATE_TESTS}),
    ),
    summary="slugify turns each space into its own dash and keeps dashes at the ends; a run of spaces and dashes "
            "must give one dash, and a slug must not start or end with a dash.",
    criteria=('slugify("Hello,  World!") returns "hello-world"', 'slugify(" - Draft - ") returns "draft"'),
    interface={"name": "slugify", "signature": "textkit.slug.slugify(text: str) -> str",
               "description": "lower case, punctuation dropped, words joined by one '-'"},
    fix=FIX,
    qc=QC,
    hidden=HIDDEN,
)
