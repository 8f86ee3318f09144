"""A repository context uses the room its budget gives (docs/adr/0035): a file too large to show whole is shown by
as many of its lines as fit, the named definitions first, and the final exact check cuts the last file down rather
than dropping it; the budget still holds, and every excerpt is whole lines at the line numbers the file has."""
from __future__ import annotations

import re

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agents.repo.budget import json_tokens
from agents.repo.excerpts import CHUNK_OVERHEAD_TOKENS, HEAD_LINES, excerpt
from agents.schemas import Ticket
from agents.schemas.repository import RepoFixContext
from lifecycle.repo_contexts import Wanted, fitted, held, view_cutter

TICKET = Ticket(summary="The step loses the request's value", acceptance_criteria=["step_40 keeps the value"])


def module(functions: int, body: int = 6) -> str:
    lines = ['"""Request steps."""', "import os", "", ""]
    for k in range(functions):
        lines += [f"def step_{k}(request, value={k}):", f'    """Step {k} of the request."""',
                  *[f"    value = value * {j} + os.getpid()  # step {k}" for j in range(body)], "    return value",
                  "", ""]
    return "\n".join(lines)


def repository(tmp_path, **files: str):
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    return tmp_path


def empty_context() -> RepoFixContext:
    return RepoFixContext(attempt=1, ticket=TICKET, files=[])


def lines_of(view) -> list[tuple[int, str]]:
    """(line number, line) for each line the view shows."""
    return [(e.start_line + i, line) for e in view.excerpts for i, line in enumerate(e.text.splitlines())]


def assert_truthful(view, text: str) -> None:
    """Each excerpt's lines are the file's at the numbers it gives, and the chunks neither overlap nor touch."""
    file_lines = text.splitlines()
    assert all(file_lines[number - 1] == line for number, line in lines_of(view))
    numbers = [number for number, _ in lines_of(view)]
    assert numbers == sorted(set(numbers))
    ends = [e.start_line + e.text.count("\n") for e in view.excerpts]
    assert all(end < start for end, start in zip(ends, [e.start_line for e in view.excerpts][1:], strict=False))


def test_a_file_too_large_grows_into_the_room_left_around_its_named_definition(tmp_path):
    big, small = module(80), module(2)
    root = repository(tmp_path, csrf=big, util=small)
    wanted = [Wanted("csrf.py", "localized (change): the step", ("step_40",)), Wanted("util.py", "localized (read)")]
    context = fitted(empty_context(), root, wanted, 6000)
    csrf, util = context.files
    assert util.whole and not csrf.whole and json_tokens(big) > 1.5 * 6000
    assert 5700 <= json_tokens(context.model_dump(mode="json")) <= 6000  # the room is used, never over
    shown = dict(lines_of(csrf))
    first, end = span_of(big, "step_40")
    assert len(shown) > 5 * (end - first + HEAD_LINES)  # the definition and the head: all it used to get
    assert {first - 50, first + 1, end, end + 50, 1, HEAD_LINES} <= set(shown)  # its neighbours, the head
    assert_truthful(csrf, big)
    spans = ", ".join(f"{e.start_line}-{e.start_line + e.text.count(chr(10)) - 1}" for e in csrf.excerpts)
    (source,) = [s for s in context.sources if s.path == "csrf.py"]
    assert source.symbol == "step_40"
    assert source.why == f"localized (change): the step; lines {spans} of {csrf.total_lines}"
    assert [s.why for s in context.sources if s.path == "util.py"] == ["localized (read)"]  # whole: no lines


def test_an_excerpt_shows_the_rest_of_the_file_from_the_top_once_the_definitions_neighbours_are_in():
    text = module(80)
    chunks = excerpt("csrf.py", text, 9000, ["step_79"])
    lines = text.splitlines(keepends=True)
    assert chunks[0].start_line == 1 and chunks[0].text.count("\n") > 300  # the head kept growing down the file
    assert "def step_79(" in chunks[-1].text and chunks[-1].text == "".join(lines[chunks[-1].start_line - 1:])
    assert sum(json_tokens(c.text) + CHUNK_OVERHEAD_TOKENS for c in chunks) <= 9000


def test_the_exact_check_cuts_the_last_file_down_instead_of_dropping_it(tmp_path):
    related = module(30)
    root = repository(tmp_path, query=module(3), related=related)
    wanted = [Wanted("query.py", "planned file of task T1"), Wanted("related.py", "localized (read)", ("step_12",))]
    roomy = fitted(empty_context(), root, wanted, 20_000)
    assert all(view.whole for view in roomy.files)
    whole = json_tokens(roomy.model_dump(mode="json"))
    for over in (1, 10, 300, 2000):
        context = held(roomy, whole - over, cut=view_cutter(root, wanted))
        tokens = json_tokens(context.model_dump(mode="json"))
        assert [f.path for f in context.files] == ["query.py", "related.py"] and context.not_shown == []
        last = context.files[-1]
        assert not last.whole and whole - over - 120 <= tokens <= whole - over  # cut by about the overshoot
        assert "def step_12(request, value=12):" in dict(lines_of(last)).values()  # the named definition first
        assert_truthful(last, related)
    assert held(roomy, whole - 1).not_shown == ["related.py"]  # without a cut (the review's whole files): dropped


def test_the_last_file_is_dropped_only_when_not_even_one_line_of_it_fits(tmp_path):
    root = repository(tmp_path, query=module(3), related=module(30))
    wanted = [Wanted("query.py", "planned file of task T1"), Wanted("related.py", "localized (read)")]
    roomy = fitted(empty_context(), root, wanted, 20_000)
    without = json_tokens(roomy.model_copy(update={"files": roomy.files[:1]}).model_dump(mode="json"))
    context = held(roomy, without + 20, cut=view_cutter(root, wanted))
    assert [f.path for f in context.files] == ["query.py"] and context.not_shown == ["related.py"]
    assert json_tokens(context.model_dump(mode="json")) <= without + 20


def test_a_context_holds_every_budget_and_says_what_it_left_out(tmp_path):
    texts = {"csrf": module(80), "util": module(2), "views": module(20)}
    root = repository(tmp_path, **texts)
    wanted = [Wanted("csrf.py", "change", ("step_40",)), Wanted("util.py", "read"), Wanted("views.py", "read"),
              Wanted("new.py", "planned file")]
    for budget in range(300, 16_000, 700):
        context = fitted(empty_context(), root, wanted, budget)
        assert json_tokens(context.model_dump(mode="json")) <= budget
        assert sorted([f.path for f in context.files] + context.not_shown) == sorted(w.path for w in wanted)
        for view in context.files:
            if view.exists:
                assert_truthful(view, texts[view.path.removesuffix(".py")])


def span_of(text: str, name: str) -> tuple[int, int]:
    """The 0-based index of a definition's first line and one past its last (its `return value`)."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if re.match(rf"def {name}\(", line))
    return first, lines.index("    return value", first) + 1


@hsettings(max_examples=60, deadline=None)
@given(functions=st.integers(1, 40), body=st.integers(0, 12), budget=st.integers(0, 4000),
       named=st.lists(st.integers(0, 45), max_size=3))
def test_an_excerpt_holds_its_budget_in_whole_lines_the_first_named_definition_first(functions, body, budget, named):
    text = module(functions, body)
    symbols = [f"step_{k}" for k in named]
    chunks = excerpt("steps.py", text, budget, symbols)
    assert sum(json_tokens(c.text) + CHUNK_OVERHEAD_TOKENS for c in chunks) <= budget
    lines = text.splitlines(keepends=True)
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert before.start_line + before.text.count("\n") < after.start_line  # in order, apart
    for chunk in chunks:
        assert "".join(lines[chunk.start_line - 1:chunk.start_line - 1 + chunk.text.count("\n")]) == chunk.text
    if symbols and named[0] < functions:
        first, end = span_of(text, symbols[0])
        definition = "".join(lines[first:end])
        if json_tokens(definition) + CHUNK_OVERHEAD_TOKENS <= budget:
            assert any(definition in c.text for c in chunks)


def test_an_excerpt_numbers_lines_by_their_newlines_as_an_editor_does():
    before = "".join(f"x_{i} = '\x0c\u2028'\n" for i in range(200))  # a form feed and U+2028 inside each line
    text = before + "def target():\n    return 1\n" + before
    chunks = excerpt("a.py", text, 60, ["target"])
    assert [(c.start_line, c.text) for c in chunks if "target" in c.text] == [(201, "def target():\n    return 1\n")]
    lines = text.split("\n")
    assert all(lines[c.start_line - 1 + i] == line for c in chunks for i, line in enumerate(c.text.split("\n")[:-1]))
