"""Writes the suite's ticket cases from the corpus (tests/ticket_corpus): per entry a folder with case.toml, the
ticket's body, its cassette (agents/cassettes/sample_ticket/make_cassette.py: the known fix as the model's answers)
and its hidden tests. The sample ticket's case uses the bundled ticket cassette and body as they are.

Run from the repository's root: python evals/offline/make_cases.py"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from agents.cassettes.sample_ticket.make_cassette import interactions  # noqa: E402
from tests.ticket_corpus import ENTRIES, SAMPLE  # noqa: E402
from tests.ticket_corpus.base import Entry  # noqa: E402

SAMPLE_TICKET = "../../../agents/cassettes/sample_ticket"


def case_toml(entry: Entry) -> str:
    own = entry.key != SAMPLE.key
    body, cassette = ("body.md", "cassette.json") if own else (f"{SAMPLE_TICKET}/body.md", f"{SAMPLE_TICKET}/cassette.json")
    return (f"# Corpus ticket {entry.key} (tests/ticket_corpus): written by make_cases.py\n"
            f'kind = "ticket"\ntitle = {json.dumps(entry.title)}\nbody = "{body}"\ncassette = "{cassette}"\n'
            f'hidden = "hidden"\n\n[repository]\nbuilder = "../make_repo.py"\nargs = ["{entry.key}"]\nbase = "main"\n')


def files(entry: Entry) -> dict[str, str]:
    """The case folder's files, by path inside it."""
    written = {"case.toml": case_toml(entry), **{f"hidden/{path}": text for path, text in entry.hidden.items()}}
    if entry.key != SAMPLE.key:
        written["body.md"] = entry.body + "\n"
        written["cassette.json"] = json.dumps({"interactions": interactions(entry)}, indent=2, ensure_ascii=False) + "\n"
    return written


def main() -> int:
    for entry in ENTRIES.values():
        for path, text in files(entry).items():
            target = HERE / entry.key / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        print(f"wrote {HERE / entry.key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
