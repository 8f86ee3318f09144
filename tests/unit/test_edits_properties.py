"""Properties of applying blocks, over generated files: a block replaces exactly the lines it matched, a block
that occurs twice is refused naming both places, CRLF files stay CRLF, and edits to distinct places commute."""
from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import assume, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agents.edits import apply_edits
from agents.edits.locate import exact_places, shifted_places

LINE = st.text(alphabet="ab (:", max_size=6)
FILES = st.lists(LINE, min_size=1, max_size=30)
FEW = hsettings(max_examples=50, deadline=None)


@dataclass(frozen=True)
class Block:
    path: str
    search: str
    replace: str


@dataclass(frozen=True)
class Plain:
    edits: list[Block]
    files: list = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def block(search: list[str], replace: list[str]) -> Block:
    return Block("f.txt", "".join(line + "\n" for line in search), "".join(line + "\n" for line in replace))


def content(lines: list[str], ending: str = "\n") -> bytes:
    return "".join(line + ending for line in lines).encode()


@st.composite
def unique_block(draw):
    """A file, a window of it that occurs exactly once and is not all blank, and new lines for it."""
    lines = draw(FILES)
    start = draw(st.integers(0, len(lines) - 1))
    search = lines[start: start + draw(st.integers(1, min(4, len(lines) - start)))]
    assume(any(line.strip() for line in search) and len(exact_places(lines, search)) == 1)
    replace = draw(st.lists(LINE, max_size=4))
    assume(replace != search)
    return lines, start, search, replace


@FEW
@given(unique_block())
def test_a_block_replaces_exactly_the_lines_it_matched(case):
    lines, start, search, replace = case
    applied = apply_edits({"f.txt": content(lines)}, Plain([block(search, replace)]))
    assert applied.ok, applied.repair_request()
    assert applied.changed["f.txt"] == content(lines[:start] + replace + lines[start + len(search):])


@FEW
@given(unique_block(), st.sampled_from(["    ", "\t", "  "]))
def test_a_block_missing_the_files_indentation_applies_as_if_written_with_it(case, indent):
    lines, start, search, replace = case
    indented = [indent + line if line.strip() else line for line in lines]
    # one place once indentation is set aside: not matching as it is, nor where a line has more leading space
    assume(not exact_places(indented, search) and len(shifted_places(indented, search)) == 1)
    applied = apply_edits({"f.txt": content(indented)}, Plain([block(search, replace)]))
    shifted = [indent + line if line.strip() else line for line in replace]
    assert applied.changed["f.txt"] == content(indented[:start] + shifted + indented[start + len(search):])
    assert applied.reindented == (1,)


@FEW
@given(st.lists(LINE, max_size=5), st.lists(LINE, min_size=1, max_size=4), st.lists(LINE, max_size=5),
       st.lists(LINE, max_size=5), st.lists(LINE, max_size=3))
def test_a_block_that_occurs_twice_is_refused_naming_both_places(before, twice, between, after, replace):
    assume(any(line.strip() for line in twice) and replace != twice)
    lines = before + twice + between + twice + after
    applied = apply_edits({"f.txt": content(lines)}, Plain([block(twice, replace)]))
    (problem,) = applied.problems
    assert problem.kind == "several_matches" and applied.changed == {}
    assert {len(before) + 1, len(before) + len(twice) + len(between) + 1} <= set(problem.lines)


@FEW
@given(unique_block())
def test_a_crlf_file_stays_crlf_and_changes_as_its_lf_twin_does(case):
    lines, _, search, replace = case
    crlf = apply_edits({"f.txt": content(lines, "\r\n")}, Plain([block(search, replace)])).changed["f.txt"]
    lf = apply_edits({"f.txt": content(lines)}, Plain([block(search, replace)])).changed["f.txt"]
    assert crlf.count(b"\n") == crlf.count(b"\r\n") and crlf == lf.replace(b"\n", b"\r\n")


@FEW
@given(st.integers(2, 30), st.data())
def test_edits_to_distinct_places_commute(size, data):
    lines = [f"line {n}" for n in range(size)]  # every window occurs once
    cut = data.draw(st.integers(1, size - 1))
    first = data.draw(st.integers(0, cut - 1)), data.draw(st.integers(1, cut))
    second = data.draw(st.integers(cut, size - 1)), data.draw(st.integers(cut + 1, size))
    blocks = [block(lines[a: max(a + 1, b)], data.draw(st.lists(st.sampled_from(["x", "y = 1", ""]), max_size=3)))
              for a, b in (first, second)]
    one = apply_edits({"f.txt": content(lines)}, Plain(blocks))
    other = apply_edits({"f.txt": content(lines)}, Plain(blocks[::-1]))
    assert one.ok and one.changed == other.changed
