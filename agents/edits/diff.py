"""The unified diff of an applied answer, for review pages and the pull request, as `git apply` reads it.

difflib (standard library) writes it; `unidiff` only parses diffs, and nothing here needs parsing.
"""
from __future__ import annotations

import difflib

from agents.edits.apply import Applied, Files
from agents.edits.text import BINARY_SNIFF_BYTES, Unreadable, split_lines

NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(before: Files, applied: Applied, *, context: int = 3) -> str:
    """One git-style section per changed, new or deleted file, in path order."""
    return "".join(_file_diff(path, before.get(path), applied.changed.get(path), context)
                   for path in sorted({*applied.changed, *applied.deleted}))


def _file_diff(path: str, old: bytes | Unreadable | None, new: bytes | None, context: int) -> str:
    head = [f"diff --git a/{path} b/{path}\n"]
    head += ["new file mode 100644\n"] if old is None else ["deleted file mode 100644\n"] if new is None else []
    old_lines, new_lines = _lines(old), _lines(new)
    if old_lines is None or new_lines is None:
        return "".join(head) + f"Binary files a/{path} and b/{path} differ\n"
    body = difflib.unified_diff(old_lines, new_lines, "/dev/null" if old is None else f"a/{path}",
                                "/dev/null" if new is None else f"b/{path}", n=context)
    # difflib leaves a last line without a newline as it is; git marks it, or the next line would join it
    return "".join(head) + "".join(line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in body)


def _lines(data: bytes | Unreadable | None) -> list[str] | None:
    if data is None:
        return []
    if isinstance(data, Unreadable) or b"\0" in data[:BINARY_SNIFF_BYTES]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return [line.text + line.ending for line in split_lines(text)]  # git's lines: split on '\n' only
