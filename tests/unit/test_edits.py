"""Search/replace edits on an existing repository's files: one place per block or a repair request naming the lines,
endings and indentation kept, Python still parsing, unsafe paths and files refused, all or nothing."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from agents.edits import MAX_FILE_BYTES, Applied, apply_edits
from agents.schemas.edits import EditsOutput

MODULE = b"""import os


def load(path):
    if not path:
        raise ValueError(path)
    with open(path) as f:
        return f.read()


def size(path):
    if not path:
        raise ValueError(path)
    return os.path.getsize(path)
"""
GUARD = "    if not path:\n        raise ValueError(path)\n"


def edit(path: str, search: str, replace: str) -> dict:
    return {"path": path, "search": search, "replace": replace}


def answer(*edits: dict, files: tuple[dict, ...] = (), deleted: tuple[str, ...] = ()) -> EditsOutput:
    return EditsOutput.model_validate({"reasoning": "r", "edits": list(edits), "files": list(files),
                                       "deleted": list(deleted)})


def only_problem(applied: Applied):
    (problem,) = applied.problems
    assert applied.changed == {} and applied.deleted == ()  # nothing applied when anything is refused
    return problem


def test_an_answer_whose_blocks_cancel_out_is_refused_as_changing_nothing():
    noted = "    return os.path.getsize(path)  # bytes\n"
    problem = only_problem(apply_edits({"m.py": MODULE}, answer(
        edit("m.py", "    return os.path.getsize(path)\n", noted), edit("m.py", noted, "    return os.path.getsize(path)\n"))))
    assert problem.kind == "no_change" and "changes nothing" in problem.message and "m.py" in problem.message


def test_a_block_replaces_the_one_place_it_matches():
    applied = apply_edits({"m.py": MODULE}, answer(edit("m.py", "    return os.path.getsize(path)\n",
                                                        "    return os.stat(path).st_size\n")))
    assert applied.ok and applied.reindented == ()
    assert applied.changed["m.py"] == MODULE.replace(b"os.path.getsize(path)", b"os.stat(path).st_size")


def test_a_block_that_matches_two_places_is_refused_with_each_line_number():
    problem = only_problem(apply_edits({"m.py": MODULE}, answer(edit("m.py", "def load(path):\n", "def load(p):\n"),
                                                                 edit("m.py", GUARD, "    assert path\n"))))
    assert (problem.kind, problem.block, problem.lines) == ("several_matches", 2, (5, 12))
    assert "block 2 (m.py): the search text matches 2 places, at lines 5, 12; include more" in problem.message


def test_a_block_that_matches_nothing_names_the_nearest_lines_with_their_numbers():
    problem = only_problem(apply_edits({"m.py": MODULE}, answer(edit("m.py", GUARD + "    return os.getsize(path)\n",
                                                                     "    return 0\n"))))
    assert (problem.kind, problem.block, problem.lines) == ("no_match", 1, (12, 13, 14))
    assert "the nearest lines are 12-14" in problem.message.lower()
    assert "   12|     if not path:\n   13|         raise ValueError(path)\n   14|     return os.path.getsize(path)" \
        in problem.message


def test_each_block_applies_to_the_file_as_the_earlier_blocks_left_it():
    later = edit("m.py", "def load_text(path):\n", "def load_text(path: str) -> str:\n")
    applied = apply_edits({"m.py": MODULE}, answer(edit("m.py", "def load(path):\n", "def load_text(path):\n"), later))
    assert b"def load_text(path: str) -> str:\n" in applied.changed["m.py"]
    problem = only_problem(apply_edits({"m.py": MODULE}, answer(later, edit("m.py", "def load(path):\n", "def x(path):\n"))))
    assert (problem.kind, problem.block) == ("no_match", 1)


def test_a_crlf_file_stays_crlf_when_the_block_is_written_with_lf():
    crlf = MODULE.replace(b"\n", b"\r\n")
    block = edit("m.py", "        raise ValueError(path)\n    return os.path.getsize(path)\n",
                 "        raise ValueError(path)\n    # bytes on disk\n    return 0\n")
    applied = apply_edits({"m.py": crlf}, answer(block))
    assert applied.changed["m.py"].endswith(b"        raise ValueError(path)\r\n    # bytes on disk\r\n    return 0\r\n")
    assert applied.changed["m.py"].count(b"\n") == applied.changed["m.py"].count(b"\r\n")


def test_untouched_lines_keep_their_own_endings_in_a_mixed_file():
    mixed = b"a = 1\r\nb = 2\nc = 3\r\n"
    applied = apply_edits({"m.py": mixed}, answer(edit("m.py", "b = 2", "b = 20\nbb = 21")))
    assert applied.changed["m.py"] == b"a = 1\r\nb = 20\nbb = 21\nc = 3\r\n"


@pytest.mark.parametrize(("search", "replace", "expected"), [
    ("c = 3", "c = 30", b"a = 1\nb = 2\nc = 30"),
    ("b = 2\nc = 3\n", "b = 2", b"a = 1\nb = 2"),
    ("c = 3", "", b"a = 1\nb = 2"),
])
def test_a_file_without_a_final_newline_still_has_none(search, replace, expected):
    applied = apply_edits({"m.py": b"a = 1\nb = 2\nc = 3"}, answer(edit("m.py", search, replace)))
    assert applied.changed["m.py"] == expected


def test_an_empty_replace_removes_the_lines_and_a_lone_newline_is_one_blank_line():
    assert apply_edits({"f.txt": b"a\nb\nc\n"}, answer(edit("f.txt", "b\n", ""))).changed["f.txt"] == b"a\nc\n"
    assert apply_edits({"f.txt": b"a\nb\nc\n"}, answer(edit("f.txt", "b\n", "\n"))).changed["f.txt"] == b"a\n\nc\n"


def test_a_block_off_by_a_uniform_indentation_is_applied_reindented_and_recorded():
    applied = apply_edits({"m.py": MODULE}, answer(edit("m.py", "with open(path) as f:\n    return f.read()\n",
                                                        "with open(path, encoding='utf-8') as f:\n    return f.read()\n")))
    assert b"    with open(path, encoding='utf-8') as f:\n        return f.read()\n" in applied.changed["m.py"]
    assert applied.reindented == (1,)


def test_a_block_indented_deeper_than_the_file_is_dedented():
    applied = apply_edits({"m.py": MODULE}, answer(edit("m.py", "        def size(path):\n", "        def size(path, /):\n")))
    assert b"\ndef size(path, /):\n" in applied.changed["m.py"] and applied.reindented == (1,)


def test_a_replace_without_the_indentation_to_remove_is_refused():
    problem = only_problem(apply_edits({"m.py": MODULE}, answer(edit("m.py", "    def size(path):\n", "size = 1\n"))))
    assert problem.kind == "indentation" and "line 11" in problem.message


def test_an_indentation_difference_that_is_not_uniform_is_no_match():
    problem = only_problem(apply_edits({"m.py": MODULE}, answer(edit("m.py", "with open(path) as f:\n  return f.read()\n",
                                                                     "pass\n"))))
    assert problem.kind == "no_match" and problem.lines == (7, 8)


def test_python_that_no_longer_parses_is_refused_with_the_line_and_the_message():
    problem = only_problem(apply_edits({"m.py": MODULE}, answer(edit("m.py", "def size(path):\n", "def size(path:\n"))))
    assert problem.kind == "syntax" and problem.lines[0] in (11, 12)
    assert problem.message.startswith(f"m.py does not parse after the edits: line {problem.lines[0]}: ")
    assert "   11| def size(path:" in problem.message


def test_python_that_did_not_parse_before_is_not_held_to_it():
    python2 = b"print 'hello'\nx = 1\n"
    applied = apply_edits({"old.py": python2}, answer(edit("old.py", "x = 1", "x = 2")))
    assert applied.changed["old.py"] == b"print 'hello'\nx = 2\n"


def test_a_new_python_file_must_parse_and_other_new_files_are_written_as_given():
    bad = answer(files=({"path": "pkg/new.py", "content": "def f(:\n"},))
    assert only_problem(apply_edits({}, bad)).kind == "syntax"
    good = answer(files=({"path": "pkg/new.py", "content": "X = 1\n"}, {"path": "notes.txt", "content": "a\r\nb"}))
    assert apply_edits({}, good).changed == {"pkg/new.py": b"X = 1\n", "notes.txt": b"a\r\nb"}


def test_writing_an_existing_file_whole_is_refused_but_an_empty_one_may_be_filled():
    whole = answer(files=({"path": "m.py", "content": "X = 1\n"},))
    problem = only_problem(apply_edits({"m.py": MODULE}, whole))
    assert problem.kind == "exists" and "change it with search/replace blocks" in problem.message
    assert apply_edits({"m.py": b""}, whole).changed == {"m.py": b"X = 1\n"}


def test_a_block_for_a_file_that_does_not_exist_says_to_write_it_whole():
    problem = only_problem(apply_edits({}, answer(edit("gone.py", "x", "y"))))
    assert problem.kind == "unknown_file" and "give the whole file in `files`" in problem.message


@pytest.mark.parametrize(("data", "why"), [
    (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "is a binary file"),
    ("naïve = 1\n".encode("latin-1"), "is not UTF-8 text (byte 2)"),
    (b"x = 1\n" * (MAX_FILE_BYTES // 6 + 1), "over the 1,000,000-byte limit"),
])
def test_binary_non_utf8_and_overlarge_files_are_refused_clearly(data, why):
    problem = only_problem(apply_edits({"f.py": data}, answer(edit("f.py", "x = 1", "x = 2"))))
    assert problem.kind == "not_text" and why in problem.message


def test_an_edit_that_would_grow_a_file_past_the_limit_is_refused():
    data = (b"#" * 999 + b"\n") * (MAX_FILE_BYTES // 1000 - 1) + b"end\n"
    problem = only_problem(apply_edits({"f.txt": data}, answer(edit("f.txt", "end", "z" * 19_000))))
    assert problem.kind == "too_large" and "would be 1,018,001 bytes" in problem.message


def test_a_blank_search_and_a_block_that_changes_nothing_are_refused():
    problems = apply_edits({"m.py": MODULE}, answer(edit("m.py", "\n\n", "x = 1\n"),
                                                    edit("m.py", "import os\n", "import os"))).problems
    assert [(p.kind, p.block) for p in problems] == [("blank_search", 1), ("no_change", 2)]


def test_every_refused_block_is_reported_at_once():
    applied = apply_edits({"m.py": MODULE, "n.py": b"y = 1\n"},
                          answer(edit("m.py", "nothing like it", "x"), edit("n.py", "y = 1", "y = 2"),
                                 edit("m.py", "    if not path:\n", "x")))
    assert [(p.path, p.kind) for p in applied.problems] == [("m.py", "no_match"), ("m.py", "several_matches")]
    assert applied.changed == {}  # n.py's good block waits for the repaired answer
    assert applied.repair_request().count("block ") == 2


def test_a_file_is_deleted_only_when_it_exists_and_no_other_change_names_it():
    assert apply_edits({"old.py": b"x = 1\n"}, answer(deleted=("old.py",))).deleted == ("old.py",)
    assert only_problem(apply_edits({}, answer(deleted=("old.py",)))).kind == "unknown_file"
    twice = answer(edit("old.py", "x = 1", "x = 2"), deleted=("old.py",))
    problem = only_problem(apply_edits({"old.py": b"x = 1\n"}, twice))
    assert problem.kind == "duplicate" and problem.path == "old.py"


@dataclass(frozen=True)
class Block:
    path: str
    search: str = "x"
    replace: str = "y"


@dataclass(frozen=True)
class Plain:
    """An answer that skipped the schema: apply_edits is a public function and checks paths again."""

    edits: list[Block]
    files: list = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


UNSAFE = ["../x.py", "a/../../b.py", "/etc/passwd", "./a.py", "a//b.py", "a/", ".git/config", "sub/.GIT/hooks/x",
          "a\\b.py", "C:/x.py", "x\0.py", "x\n.py", "", "a" * 301,
          "m\udcf3dulo.py", "x\u2028.py", "x\x85.py"]  # on disk not UTF-8; names the index and changed paths leave out


@pytest.mark.parametrize("path", UNSAFE, ids=range(len(UNSAFE)))
def test_an_unsafe_path_is_refused_by_the_schema_and_by_apply(path):
    with pytest.raises(ValidationError):
        answer(edit(path, "x", "y"))
    problem = only_problem(apply_edits({path: b"x\n"}, Plain([Block(path)])))
    assert problem.kind == "unsafe_path"


@pytest.mark.parametrize("path", ["conftest.py", "pkg/tests/conftest.py", ".github/workflows/ci.yml",
                                  "tests/acceptance/test_a.py", "pytest.py", "lib/site-packages/x.py", "x.pth"])
def test_the_engineer_may_not_touch_what_runs_or_checks_the_tests(path):
    with pytest.raises(ValidationError, match="belong to QC or DevOps"):
        answer(edit(path, "x", "y"))
    with pytest.raises(ValidationError, match="belong to QC or DevOps"):
        answer(deleted=(path,))


def test_an_answer_must_change_something():
    with pytest.raises(ValidationError, match="an answer must change something"):
        answer()
