"""Writes a corpus ticket's repository (tests/ticket_corpus) with its history, and the wheels it installs.

    python evals/offline/make_repo.py TARGET WHEELS ENTRY_KEY

The suite's builder for its ticket cases (lifecycle/evals/suites.py runs it from the repository's root)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.ticket_corpus import ENTRIES  # noqa: E402 - the corpus is found from the repository's root
from tests.ticket_corpus.base import write_history  # noqa: E402


def main(argv: list[str]) -> int:
    target, wheels, key = Path(argv[0]), Path(argv[1]), argv[2]
    entry = ENTRIES[key]
    write_history(entry, target)
    for wheel in entry.wheels:
        wheel.write(wheels)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
