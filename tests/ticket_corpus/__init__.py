"""A corpus of tickets on small repositories with real history, each with its known fix, to judge a run on an
existing repository (docs/adr/0035) against what a person would deliver.

Each entry holds:
- the repository, as commits (message, files) replayed onto `main` with git, and any wheel it installs (built with
  agents.environments.wheels.write_wheel, installed from local wheels only, never an index);
- the ticket (title, body) and the kind triage should give it (bug, feature or change);
- the team's scripted answers (`answers()`): triage, the clarified ticket with its acceptance criteria, the plan,
  the engineer's known fix in the EditsOutput shape (search/replace blocks, ADR 28), the code review and QC's
  acceptance tests (QCOutput: for a bug, the reproduction that fails at the base commit and passes after);
- hidden tests that judge the delivered branch: never shown to the team (no answer, context or cassette holds
  them), each failing at the base commit and passing with the fix;
- the expected outcome (OUTCOMES).

CONTROLS are negative controls on an entry's repository: an empty change, a change that breaks a passing test, a
400-line change. tests/unit/test_ticket_corpus.py checks every entry and control at the leaf level;
agents/cassettes/sample_ticket/ turns the SAMPLE entry into the bundled ticket cassette and demo repository.
"""
from tests.ticket_corpus import controls, csvtools, durations, invoice, retry, shop, textkit
from tests.ticket_corpus.base import DELIVERED, FLAGGED, OUTCOMES, REFUSED, STOPPED, Control, Entry

ENTRIES: dict[str, Entry] = {entry.key: entry for entry in (textkit.ENTRY, shop.ENTRY, invoice.ENTRY, csvtools.ENTRY,
                                                            durations.ENTRY, retry.ENTRY)}
CONTROLS: dict[str, Control] = {control.key: control for control in controls.controls(textkit.ENTRY)}
SAMPLE = ENTRIES["textkit-slug-dashes"]  # the bundled ticket cassette's and `make ticket-demo`'s

__all__ = ["CONTROLS", "DELIVERED", "ENTRIES", "FLAGGED", "OUTCOMES", "REFUSED", "SAMPLE", "STOPPED", "Control",
           "Entry"]
