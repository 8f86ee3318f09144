"""Writes the bundled ticket cassette (cassette.json), the ticket's title (title.txt) and body (body.md) from the
corpus's SAMPLE entry (tests/ticket_corpus/textkit.py): the answers a person wrote for that ticket, in the shape
each role returns (docs/role-schemas.md), each pinned to the run it answers (docs/cassettes.md).

Pins, by what each request carries of this run: triage the ticket's body, the clarification the brief (the same
body), the localization and the plan the clarified summary (each by its own tool), the engineer the plan
task's definition of done, QC the first acceptance criterion, the code review the edited file's path plus the
regression test the fix adds (so it answers only after the fix is in).

Run from the repository's root: python agents/cassettes/sample_ticket/make_cassette.py [ENTRY KEY [FOLDER]]
(another entry of tests/ticket_corpus, written to FOLDER: a cassette for each corpus ticket).
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.ticket_corpus import SAMPLE  # noqa: E402 - the corpus is found from the repository's root

MODEL = "claude-sonnet-5-5"


def usage(tokens_in: int, tokens_out: int) -> dict[str, int]:
    return {"input_tokens": tokens_in, "output_tokens": tokens_out, "cache_read_tokens": 0, "cache_creation_tokens": 0}


def interactions(entry=SAMPLE) -> list[dict]:
    """A corpus entry's answers as cassette interactions, from triage to QC (DevOps does not run on an existing
    repository: its CI is the repository's own)."""
    answers = entry.answers()
    task = answers["plan"]["tasks"][0]
    regression = _regression_test(answers["engineer"])  # only in the review's files once the fix is in
    rows = [
        ("product_owner", "submit_triage_output", {"body": entry.body}, [], answers["triage"], (900, 90)),
        ("product_owner", "submit_bug_ticket_output", {"brief": entry.body}, [], answers["clarify"], (1400, 420)),
        ("tech_lead", "submit_localization_output", {"summary": entry.summary}, [], answers["localize"],
         (3900, 260)),
        ("tech_lead", "submit_ticket_plan_output", {"summary": entry.summary}, [], answers["plan"], (2100, 380)),
        ("senior_engineer", "submit_edits_output", {"definition_of_done": task["definition_of_done"]}, [],
         answers["engineer"], (5200, 610)),
        ("tech_lead", "submit_code_review_verdict", {"path": entry.fixed_paths[0]}, [regression],
         answers["code_review"], (4800, 160)),
        ("qc_engineer", "submit_qc_output", {"criterion": entry.criteria[0]}, [], answers["qc"], (2300, 540)),
    ]
    return [{"role": role, "tool": tool, "recorded_for": pins, "match": match, "tool_input": answer, "model": MODEL,
             "usage": usage(*tokens), "latency_ms": 40 * tokens[1]}
            for role, tool, pins, match, answer, tokens in rows]


def _regression_test(fix: dict) -> str:
    """The name of the first test function the fix adds: a string the files show only after the change."""
    def tests(text: str) -> list[str]:
        return [line.split("(")[0].removeprefix("def ") for line in text.splitlines() if line.startswith("def test")]

    added = [name for block in fix.get("edits", []) for name in tests(block["replace"])
             if name not in tests(block["search"])]
    return (added + [name for new in fix.get("files", []) for name in tests(new["content"])])[0]


def files(entry=SAMPLE) -> dict[str, str]:
    """What this script writes, by name: the cassette, the ticket's title and its body."""
    cassette = json.dumps({"interactions": interactions(entry)}, indent=2, ensure_ascii=False) + "\n"
    return {"cassette.json": cassette, "title.txt": entry.title + "\n", "body.md": entry.body + "\n"}


def main(argv: list[str]) -> int:
    from tests.ticket_corpus import ENTRIES

    entry = ENTRIES[argv[0]] if argv else SAMPLE
    folder = Path(argv[1]) if len(argv) > 1 else HERE
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files(entry).items():
        (folder / name).write_text(text, encoding="utf-8")
        print(f"wrote {folder / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
