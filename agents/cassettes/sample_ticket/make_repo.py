"""Writes the sample repository `make ticket-demo` runs its ticket on: the corpus's SAMPLE entry (textkit, whose
slugify leaves double dashes; tests/ticket_corpus/textkit.py), its commits replayed with fixed dates, so the same
repository (the same commits) comes out every time.

Run from the repository's root: python agents/cassettes/sample_ticket/make_repo.py [TARGET]   (default
var/sample-ticket-repo). An existing TARGET is replaced.
"""
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.ticket_corpus import SAMPLE  # noqa: E402 - the corpus is found from the repository's root
from tests.ticket_corpus.base import write_history  # noqa: E402


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else ROOT / "var" / "sample-ticket-repo"
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    shas = write_history(SAMPLE, target)
    print(f"wrote {target}: {len(shas)} commits on main, head {shas[-1][:10]} ({SAMPLE.key})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
