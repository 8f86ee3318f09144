"""Playbooks: which phases of the team's work a requirement goes through, chosen at submission.

A playbook is a declared, ordered list of phases. "new_feature" is the whole flow; "bug_fix"
skips story writing and design: the Product Owner's clarified ticket (with its acceptance
criteria) goes straight to the Tech Lead's plan, then code, review, QC and deployment.
The FSM asks this module what a requirement's playbook allows (guards.playbook_*), and the
contexts ask it what the agents after a skipped phase work from. Pure: no ORM.
"""
from __future__ import annotations

from dataclasses import dataclass

from lifecycle.errors import DomainError, capped, echoed

# Every phase in the order the flow runs them; a playbook lists a subsequence.
PHASES = ("clarify", "stories", "design", "plan", "develop", "code_review", "quality_gate", "deploy")
# No playbook may skip these: the FSM has no way around them ("no jump skips a state").
REQUIRED = ("clarify", "plan", "develop", "code_review", "quality_gate", "deploy")
# The architect designs from approved stories, and design_ready after stories needs an approved spec:
# the two phases come together or not at all.
COUPLED = ("stories", "design")


@dataclass(frozen=True)
class Playbook:
    name: str
    label: str
    phases: tuple[str, ...]

    def __post_init__(self) -> None:
        problems = _problems(self.phases)
        if problems:
            raise ValueError(f"playbook {self.name!r}: {'; '.join(problems)}")

    @property
    def writes_stories(self) -> bool:
        """True: BA stories and the architect's spec; False: the team works from the clarified ticket."""
        return "stories" in self.phases


def _problems(phases: tuple[str, ...]) -> list[str]:
    problems = [f"unknown phase {p!r}" for p in phases if p not in PHASES]
    known = [p for p in phases if p in PHASES]
    if len(set(phases)) != len(phases) or known != sorted(known, key=PHASES.index):
        problems.append(f"phases must be distinct and in the order {', '.join(PHASES)}")
    problems += [f"phase {p!r} cannot be skipped" for p in REQUIRED if p not in phases]
    if len({p in phases for p in COUPLED}) > 1:
        problems.append(f"phases {' and '.join(COUPLED)} come together or not at all")
    return problems


NEW_FEATURE = Playbook("new_feature", "New feature", PHASES)
BUG_FIX = Playbook("bug_fix", "Bug fix", ("clarify", "plan", "develop", "code_review", "quality_gate", "deploy"))
# A feature or a change a ticket asks of an existing repository: like a bug fix, the clarified ticket is planned
# directly (docs/adr/0035); the change is kept small by the scope guard, not by stories.
CHANGE = Playbook("change", "Change to an existing repository", BUG_FIX.phases)
PLAYBOOKS = {p.name: p for p in (NEW_FEATURE, BUG_FIX, CHANGE)}
DEFAULT = NEW_FEATURE.name
CHOICES = [(p.name, p.label) for p in PLAYBOOKS.values()]
# The playbook each kind of ticket runs once the Product Owner has triaged it (agents/schemas/triage.py); a
# question and an out-of-scope ticket run none. The model names the kind, these tables the playbook: on an
# existing repository a feature or a change is a change to it; on a new project, the whole flow (ADR 0034, 0035).
TRIAGE_PLAYBOOKS = {"bug": BUG_FIX.name, "feature": NEW_FEATURE.name, "change": NEW_FEATURE.name}
REPOSITORY_TRIAGE_PLAYBOOKS = {"bug": BUG_FIX.name, "feature": CHANGE.name, "change": CHANGE.name}


def triage_playbook(kind: str, *, repository: bool, table: dict[str, str] | None = None) -> str:
    """The playbook a triaged ticket of this kind runs ("" for a question or an out-of-scope ticket); `table` is the
    project's own playbook table (settings["playbooks"], changed only by a promotion: ADR 39), over the defaults."""
    if kind in TRIAGE_PLAYBOOKS and kind in (table or {}):
        return table[kind]
    return (REPOSITORY_TRIAGE_PLAYBOOKS if repository else TRIAGE_PLAYBOOKS).get(kind, "")


def table_problems(table: object) -> list[str]:
    """What is wrong with a project's playbook table: ticket kind → playbook name, for the kinds triage names."""
    if not isinstance(table, dict):
        return ["a playbook table is an object of ticket kind → playbook name"]
    problems = [f"unknown ticket kind {echoed(kind, quoted=True)}; use {', '.join(TRIAGE_PLAYBOOKS)}" for kind in table
                if kind not in TRIAGE_PLAYBOOKS] + [
        f"{echoed(kind)}: unknown playbook {echoed(repr(name))}; use one of {', '.join(PLAYBOOKS)}"
        for kind, name in table.items() if not isinstance(name, str) or name not in PLAYBOOKS]
    return capped(problems)  # each repeats at most ECHO_MAX_CHARS of a name


class UnknownPlaybook(DomainError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown playbook {echoed(repr(name))}; use one of {', '.join(PLAYBOOKS)}", "playbook")


def playbook_named(name: str) -> Playbook:
    """The playbook called `name`; an unknown name is an error (400 on the API), never a silent default."""
    try:
        return PLAYBOOKS[name]
    except KeyError:
        raise UnknownPlaybook(name) from None
