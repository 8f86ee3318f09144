"""Apply an engineer's answer to the files as they stand: a pure function from (contents by path, answer) to the
new contents, or to one problem per refused block or file, each worded as a repair request to the model.

Blocks apply in the answer's order, each to its file as it stands after the earlier blocks of the same answer
(as a person applies a list of changes, and as Aider and OpenHands do): a block never has to quote text an earlier
block removed, and a later block may anchor on text an earlier one added.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agents import python_ast
from agents.edits.locate import Place, exact_places, nearest, reindent, shifted_places
from agents.edits.text import (
    MAX_FILE_BYTES,
    Line,
    NotText,
    Unreadable,
    block_lines,
    common_ending,
    decode,
    join_lines,
    path_problem,
    split_lines,
)

PYTHON = (".py", ".pyi")
EXCERPT_LINES = 30
EXCERPT_LINE_CHARS = 200


class Block(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def search(self) -> str: ...
    @property
    def replace(self) -> str: ...


class NewFile(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def content(self) -> str: ...


class Answer(Protocol):
    """What `agents.schemas.edits.EditAnswer` holds; any object with these attributes will do."""

    @property
    def edits(self) -> Sequence[Block]: ...
    @property
    def files(self) -> Sequence[NewFile]: ...
    @property
    def deleted(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class Problem:
    """One refused block or file. `message` is addressed to the model: the repair request names the path, the
    block (from 1, in the answer's order) and the lines it is about (from 1, as an editor shows them)."""

    path: str
    kind: str  # unsafe_path | duplicate | unknown_file | exists | not_text | blank_search | no_change | no_match
    #            | several_matches | indentation | too_large | syntax
    message: str
    block: int | None = None
    lines: tuple[int, ...] = ()


@dataclass(frozen=True)
class Applied:
    """All or nothing: with any problem, nothing is changed or deleted."""

    changed: dict[str, bytes] = field(default_factory=dict)  # edited and new files, whole
    deleted: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    reindented: tuple[int, ...] = ()  # blocks accepted after a uniform indentation shift, for the record

    @property
    def ok(self) -> bool:
        return not self.problems

    def repair_request(self) -> str:
        return "\n\n".join(problem.message for problem in self.problems)


def named_paths(answer: Answer) -> list[str]:
    """Every path the answer names, in order, once: what the caller reads before applying it."""
    paths = [block.path for block in answer.edits] + [f.path for f in answer.files] + list(answer.deleted)
    return list(dict.fromkeys(paths))


Files = Mapping[str, bytes | Unreadable]


def apply_edits(files: Files, answer: Answer) -> Applied:
    """`files` holds at least every existing file the answer names (a path missing from it does not exist), as
    `read_files` gives them."""
    problems = _path_problems(answer)
    if problems:
        return Applied(problems=tuple(problems))
    changed, reindented = {}, []
    for path in dict.fromkeys(block.path for block in answer.edits):
        blocks = [(i, b) for i, b in enumerate(answer.edits, start=1) if b.path == path]
        data, shifted, found = _edit_file(path, files.get(path), blocks)
        problems += found
        reindented += shifted
        if data is not None:
            changed[path] = data
    for new in answer.files:
        data, found = _new_file(new, files.get(new.path))
        problems += found
        changed[new.path] = data
    problems += [_deletion_problem(path, files.get(path)) for path in answer.deleted
                 if not isinstance(files.get(path), bytes)]
    if problems:
        return Applied(problems=tuple(problems))
    changed = {path: data for path, data in changed.items() if files.get(path) != data}
    if not changed and not answer.deleted:  # blocks that cancel out, a new file written as it already is
        paths = ", ".join(named_paths(answer))
        return Applied(problems=(Problem(named_paths(answer)[0], "no_change", (
            f"the answer changes nothing: {paths} would be exactly as they are now. Give the blocks that make the "
            "change the task asks for.")),))
    return Applied(changed=changed, deleted=tuple(answer.deleted), reindented=tuple(reindented))


def _path_problems(answer: Answer) -> list[Problem]:
    """Unsafe paths, and a path named in two of edits, files and deleted (or twice in files or deleted)."""
    problems = [Problem(path, "unsafe_path", f"{path!r} is refused: {why}")
                for path in named_paths(answer) if (why := path_problem(path))]
    kinds = [{b.path for b in answer.edits}, *([f.path] for f in answer.files), *([p] for p in answer.deleted)]
    seen: set[str] = set()
    for paths in kinds:
        for path in sorted(seen & set(paths)):
            problems.append(Problem(path, "duplicate", f"{path} is named twice: edit a file with blocks, write a new "
                                    "file whole, or delete a file, once each"))
        seen |= set(paths)
    return problems


Edited = tuple[bytes | None, list[int], list[Problem]]  # new contents, re-indented blocks, problems


def _edit_file(path: str, data: bytes | Unreadable | None, blocks: list[tuple[int, Block]]) -> Edited:
    first = blocks[0][0]
    if data is None:
        return None, [], [Problem(path, "unknown_file", f"block {first}: {path} does not exist in the repository; to "
                                  "create it, give the whole file in `files`", block=first)]
    try:
        before = decode(path, data)
    except NotText as exc:
        return None, [], [Problem(path, "not_text", f"block {first}: {exc}", block=first)]
    lines, problems, shifted = split_lines(before), [], []
    for number, block in blocks:
        outcome = _apply_block(path, lines, number, block)
        if isinstance(outcome, Problem):
            problems.append(outcome)
        else:
            lines, was_shifted = outcome
            shifted += [number] if was_shifted else []
    after = join_lines(lines)
    problems += _size_problem(path, after) + _syntax_problem(path, after, before=before)
    return after.encode("utf-8"), shifted, problems


def _apply_block(path: str, lines: list[Line], number: int, block: Block) -> Problem | tuple[list[Line], bool]:
    search, replace = block_lines(block.search), block_lines(block.replace)
    if not any(line.strip() for line in search):
        return Problem(path, "blank_search", f"block {number} ({path}): the search text is blank; quote the whole "
                       "lines to change, with enough of their neighbours to match one place", block=number)
    if search == replace:
        return Problem(path, "no_change", f"block {number} ({path}): the replace text is the search text; the block "
                       "changes nothing: drop it or say what should change", block=number)
    texts = [line.text for line in lines]
    places = exact_places(texts, search) or shifted_places(texts, search)
    if len(places) != 1:
        return _several(path, number, places) if places else _no_match(path, number, texts, search)
    place = places[0]
    new = reindent(replace, place)
    if new is None:
        return Problem(path, "indentation", f"block {number} ({path}): the search text matches line {place.start + 1} "
                       f"once {place.remove!r} of indentation is removed, but the replace text has lines without that "
                       "indentation; write the block with the file's indentation", block=number,
                       lines=(place.start + 1,))
    return _splice(lines, place, len(search), new), bool(place.add or place.remove)


def _splice(lines: list[Line], place: Place, count: int, new: list[str]) -> list[Line]:
    """New lines take the ending of the first line they replace; a file that ended without a newline still does."""
    start, end = place.start, place.start + count
    ending = lines[start].ending or common_ending(lines)
    added = [Line(text, ending) for text in new]
    if end == len(lines) and lines[-1].ending == "":
        if added:
            added[-1] = Line(added[-1].text, "")
        elif start > 0:
            return lines[: start - 1] + [Line(lines[start - 1].text, "")]
    return lines[:start] + added + lines[end:]


def _no_match(path: str, number: int, texts: list[str], search: list[str]) -> Problem:
    if not texts:
        return Problem(path, "no_match", f"block {number} ({path}): the file is empty, so no search text matches; "
                       "give its whole new content in `files` instead", block=number)
    start, ratio = nearest(texts, search)
    end = min(start + len(search), len(texts))
    message = (f"block {number} ({path}): the search text matches no place in the file as it stands after the "
               f"answer's earlier blocks. The nearest lines are {start + 1}-{end} (similarity {ratio:.2f}):\n"
               f"{excerpt(texts, start, end)}\nQuote whole lines exactly as the file has them (indentation, "
               "spelling, blank lines).")
    return Problem(path, "no_match", message, block=number, lines=tuple(range(start + 1, end + 1)))


def _several(path: str, number: int, places: list[Place]) -> Problem:
    at = [place.start + 1 for place in places]
    shown = ", ".join(map(str, at[:20])) + (f" and {len(at) - 20} more" if len(at) > 20 else "")
    return Problem(path, "several_matches", f"block {number} ({path}): the search text matches {len(at)} places, at "
                   f"lines {shown}; include more of the surrounding lines so that it matches exactly one",
                   block=number, lines=tuple(at))


def _deletion_problem(path: str, data: Unreadable | None) -> Problem:
    why = f"it is {data.why}" if data else "it does not exist in the repository"
    return Problem(path, "unknown_file" if data is None else "not_text", f"{path} cannot be deleted: {why}")


def _new_file(new: NewFile, old: bytes | Unreadable | None) -> tuple[bytes, list[Problem]]:
    """Whole files are for new files (and an existing empty one, which no block could match): writing over a
    file with content would hide what changed in it and could drop what the model never saw."""
    if isinstance(old, Unreadable):
        return b"", [Problem(new.path, "not_text", f"{new.path} is {old.why}; it cannot be written")]
    if old:
        return b"", [Problem(new.path, "exists", f"{new.path} already exists: change it with search/replace blocks "
                             "in `edits`, not by writing the whole file")]
    return new.content.encode("utf-8"), _size_problem(new.path, new.content) + _syntax_problem(new.path, new.content)


def _size_problem(path: str, text: str) -> list[Problem]:
    size = len(text.encode("utf-8"))
    if size <= MAX_FILE_BYTES:
        return []
    return [Problem(path, "too_large", f"{path} would be {size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit")]


def _syntax_problem(path: str, text: str, *, before: str | None = None) -> list[Problem]:
    """Python must still parse; an edited file that did not parse before (Python 2, a fixture) is not held to it."""
    if not path.endswith(PYTHON) or (before is not None and _parse_error(before) is not None):
        return []
    error = _parse_error(text)
    if error is None:
        return []
    line, why = error
    texts = [item.text for item in split_lines(text)]
    shown = excerpt(texts, max(line - 3, 0), min(line + 2, len(texts))) if texts else ""
    return [Problem(path, "syntax", f"{path} does not parse after the edits: line {line}: {why}\n{shown}",
                    lines=(line,))]


def _parse_error(text: str) -> tuple[int, str] | None:
    try:
        python_ast.parse(text)  # parsing only: nothing of the model's code is compiled or run
    except SyntaxError as exc:
        return exc.lineno or 1, exc.msg
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes; nesting deeper than the parser allows
        return 1, str(exc) or type(exc).__name__
    return None


def excerpt(texts: list[str], start: int, end: int) -> str:
    """Lines start..end-1 numbered from 1, as an editor shows them; long excerpts and lines cut."""
    shown = texts[start: min(end, start + EXCERPT_LINES)]
    body = [f"{start + i + 1:>5}| {text[:EXCERPT_LINE_CHARS]}" for i, text in enumerate(shown)]
    return "\n".join(body + ([f"  ... {end - start - len(shown)} more lines"] if end - start > len(shown) else []))
