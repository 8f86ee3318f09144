"""Negative controls on an entry's repository: answers a run must not deliver as they are."""
from __future__ import annotations

from tests.ticket_corpus.base import FLAGGED, REFUSED, STOPPED, Control, Entry

SPRAWL_LINES = 400


def controls(entry: Entry) -> tuple[Control, ...]:
    """The three controls for the textkit entry (its slug.py and tests)."""
    line = '    return re.sub(r"\\s", "-", text)\n'
    noted = '    return re.sub(r"\\s", "-", text)  # one dash per space\n'
    empty = {"reasoning": "Looked at slugify; a note added and taken back: nothing changes.",
             "edits": [{"path": "textkit/slug.py", "search": line, "replace": noted},
                       {"path": "textkit/slug.py", "search": noted, "replace": line}]}
    breaking = {"reasoning": "Underscores instead of dashes between words.",
                "edits": [{"path": "textkit/slug.py", "search": line, "replace": '    return re.sub(r"\\s+", "_", text)\n'}]}
    words = "\n".join(f'    "word{n:03d}",' for n in range(SPRAWL_LINES - 2))
    sprawl = {"reasoning": "The fix, and a stop-word list nobody asked for.",
              "edits": entry.fix["edits"],
              "files": [{"path": "textkit/stopwords.py", "content": f"STOPWORDS = (\n{words}\n)\n"}]}
    return (
        Control("empty-change", entry, empty, REFUSED,
                "the blocks cancel out: the answer applies, and the files are as they were at base"),
        Control("breaks-a-passing-test", entry, breaking, STOPPED,
                "tests/test_slug.py::test_spaces_become_dashes passed at base and fails after"),
        Control("over-400-lines", entry, sprawl, FLAGGED,
                f"the fix plus a {SPRAWL_LINES}-line new module: over the default limit of 300 lines"),
    )
