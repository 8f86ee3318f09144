"""Failure classification: ordered rules, the first match decides where a failure goes.

Pure: a `Failure` is plain facts gathered by the service where the failure happened (a step
that raised, a failing self-test run, a code review, the QC gate); `classify` evaluates every
rule in order and returns a `Routing` whose trace lists each rule and whether it matched, so
the admin and the API can show why a failure went where it went, including the rules that
also matched but lost on order. No database, no clock, no randomness: the same facts always
route the same way.

Order, and why:
1. Tool and infrastructure errors (LLM outage, worker time limit, sandbox timeout, git) say
   nothing about the work, so they are judged first: retry with backoff while the step has
   runs left, then a human operator.
2. A step that raised for a reason of its own is named as such, so the person asked knows what
   to look at: the model's answer stayed invalid through the bounded repairs (a person: retry,
   perhaps with another prompt, or cancel), or our own code failed (a TypeError, a crashing
   output validator: a bug, an operator), or an existing repository cannot be prepared as it
   stands (not Python, no base branch, an install or a test command that fails, a remote the
   operator's rule refuses: a person fixes the repository or the project's settings).
3. A test report the code under test forged (ADR 25) says nothing true about the work, and a run that
   cheated is a person's to judge, not one more attempt's: a human, whatever else failed.
4. The same failure again right after a fix means the loop is not converging: a human now,
   instead of burning the remaining attempts.
5. A used-up loop (engineer attempts, code review rounds) goes to a human whatever the cause.
6. Problems upstream of the code (an inconsistent spec, acceptance criteria no test covers)
   go to the role that owns them before the engineer touches code built on them. A bug's
   reproduction test that passes at the base commit is QC's, not the engineer's: the gate hands
   it back to QC first (lifecycle/services/gate_routing.py); one still passing there after that
   is a person's to look at, never the engineer's next attempt.
7. What is left of the code's own failures (failing tests, review notes, gate findings) goes
   to the engineer. Nothing matched: a human operator looks (a permanent error such as a
   misconfiguration or a refused answer, or a bug of a kind not listed).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum


class Route(StrEnum):
    RETRY = "retry"
    OPERATOR = "operator"
    HUMAN = "human"
    ARCHITECT = "architect"
    BUSINESS_ANALYST = "business_analyst"
    ENGINEER = "engineer"


class Source(StrEnum):
    STEP = "step"  # a step raised (model call, sandbox, git, a bug)
    SELF_TEST = "self_test"  # the engineer's tests failed in the sandbox
    CODE_REVIEW = "code_review"  # the tech lead requested changes
    QUALITY_GATE = "quality_gate"  # QC's gate failed


# Exception class names (anywhere in the exception's MRO) that mean "the tools failed, not the work".
INFRASTRUCTURE_ERRORS = frozenset({
    "LLMTransientError",  # 429/529/timeouts/connection errors after the SDK's own retries: an LLM outage
    "SoftTimeLimitExceeded",  # the worker's time limit for one step
    "SandboxTimedOut",  # the sandbox killed the test run at its wall-clock limit
    "LintUnavailable",  # actionlint missing, timed out or broken while checking DevOps' workflow
    "GitError",  # git failed in the requirement's workspace
    "DeliveryError",  # git or the GitHub API refused during delivery
    "TimeoutExpired",  # a subprocess timed out
    "ConnectionError",  # the network (incl. builtins' ConnectionRefusedError, ConnectionResetError)
    "OperationalError",  # the database: a deadlock, a serialization failure, a lock timeout, a lost connection
})
INVALID_MODEL_OUTPUT, INTERNAL_ERROR = "invalid_model_output", "internal_error"  # rule names the step_failed task reads
REPOSITORY_UNUSABLE = "repository_unusable"
# The repository or the project's settings are at fault, not the tools: running the step again changes nothing
# until a person does (lifecycle/services/preparation.py names the failures so).
REPOSITORY_ERRORS = frozenset({"RepositoryUnusable", "IndexTooLarge"})  # the second: agents/repo/files.py
TAMPERED = "tampered"  # the rule name an escalation task reads
# The model's answer refused by its schema on every try of the bounded repair loop (agents/llm/structured.py).
INVALID_OUTPUT_ERRORS = frozenset({"LLMOutputStillInvalid"})
# Exceptions only a bug raises: our own code (a service, a context loader, an output validator) is wrong. Not
# ValueError: a validator's ValueError is a refusal of the answer, and elsewhere it often is bad input.
PROGRAMMING_ERRORS = frozenset({
    "TypeError", "AttributeError", "NameError", "LookupError", "AssertionError", "ArithmeticError",
    "NotImplementedError", "RecursionError", "ImportError",
})


@dataclass(frozen=True)
class Failure:
    """The facts one failure is classified on. Collections are tuples so a Failure is hashable and comparable."""

    source: Source
    step: str = ""  # the step kind where it happened, e.g. "self_test", "engineer", "deliver"
    error_classes: tuple[str, ...] = ()  # the exception's class and its bases, most specific first
    error: str = ""
    tests_failed: bool = False  # a sandbox run did not pass (failing ids may be empty: nothing collected)
    failing_tests: tuple[str, ...] = ()
    review_notes: tuple[str, ...] = ()  # the tech lead's notes on the code
    spec_issues: tuple[str, ...] = ()  # findings that the spec itself is inconsistent or wrong
    uncovered_criteria: tuple[str, ...] = ()  # acceptance criteria no QC test checks
    gate_reasons: tuple[str, ...] = ()  # every reason the quality gate gave
    runs_left: int = 0  # how many more times this step may run (infrastructure retries)
    loop_exhausted: bool = False  # engineer attempts or review rounds used up
    after_fix: bool = False  # a fix ran since the previous failure of this source
    previous_signature: str = ""  # the previous failure's signature, same source
    repairs: int = 0  # repair requests sent before the model's output was given up as invalid
    validation_errors: tuple[str, ...] = ()  # the last answer's validation errors, "loc: msg"
    tampered: tuple[str, ...] = ()  # why a sandbox report cannot be believed (agents/sandbox/canary.py)
    not_reproducing: tuple[str, ...] = ()  # a bug's reproduction tests that pass at the base commit (QC rewrote them)

    @property
    def infrastructure(self) -> bool:
        return bool(INFRASTRUCTURE_ERRORS.intersection(self.error_classes))

    @property
    def invalid_output(self) -> bool:
        return bool(INVALID_OUTPUT_ERRORS.intersection(self.error_classes))

    @property
    def internal(self) -> bool:
        return bool(PROGRAMMING_ERRORS.intersection(self.error_classes))

    @property
    def signature(self) -> str:
        """What makes two failures "the same": failing test ids, uncovered criteria, the error class.
        Prose (review notes, error messages) is left out: a model rewords the same problem."""
        facts = {"tests": sorted(self.failing_tests), "failed": self.tests_failed,
                 "uncovered": sorted(self.uncovered_criteria), "error": self.error_classes[:1]}
        if not any(facts.values()):
            return ""
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {**asdict(self), "infrastructure": self.infrastructure, "invalid_output": self.invalid_output,
                "internal": self.internal, "signature": self.signature}


@dataclass(frozen=True)
class Rule:
    name: str
    route: Route
    because: str  # what the rule means, shown in the trace
    test: Callable[[Failure], bool]


RULES: tuple[Rule, ...] = (
    Rule("infrastructure_retry", Route.RETRY, "a tool or infrastructure error and the step has runs left",
         lambda f: f.infrastructure and f.runs_left > 0),
    Rule("infrastructure_exhausted", Route.OPERATOR, "a tool or infrastructure error: an operator looks",
         lambda f: f.infrastructure),
    Rule(INVALID_MODEL_OUTPUT, Route.HUMAN, "the model's answer stayed invalid after the bounded repairs",
         lambda f: f.invalid_output),
    Rule(INTERNAL_ERROR, Route.OPERATOR, "an exception in aiteam's own code (a TypeError, a crashing validator): "
         "a bug, an operator looks", lambda f: f.internal),
    Rule(REPOSITORY_UNUSABLE, Route.HUMAN, "the repository cannot be prepared as it stands (not Python, no base "
         "branch, an install or a test command that fails, a refused remote): a person fixes it or the project's "
         "settings, then retries", lambda f: bool(REPOSITORY_ERRORS.intersection(f.error_classes))),
    Rule(TAMPERED, Route.HUMAN, "the code under test forged its own test report (the runner's canaries or the tests "
         "its files define say so): a person looks, and nothing is delivered", lambda f: bool(f.tampered)),
    Rule("repeated_after_fix", Route.HUMAN, "the same failure as before the last fix: the loop is not converging",
         lambda f: f.after_fix and bool(f.signature) and f.signature == f.previous_signature),
    Rule("loop_exhausted", Route.HUMAN, "the engineer attempts or review rounds are used up",
         lambda f: f.loop_exhausted),
    Rule("spec_inconsistency", Route.ARCHITECT, "the review found the spec itself inconsistent",
         lambda f: bool(f.spec_issues)),
    Rule("acceptance_gap", Route.BUSINESS_ANALYST, "acceptance criteria that no acceptance test covers",
         lambda f: bool(f.uncovered_criteria)),
    Rule("reproduction_passes_at_base", Route.HUMAN, "QC's reproduction test passes at the base commit, so it does "
         "not reproduce the bug, even after QC wrote it again: no fix can make it fail there, a person looks",
         lambda f: bool(f.not_reproducing)),
    Rule("failing_tests", Route.ENGINEER, "tests fail", lambda f: f.tests_failed or bool(f.failing_tests)),
    Rule("review_changes", Route.ENGINEER, "the tech lead requested changes to the code",
         lambda f: bool(f.review_notes)),
    Rule("gate_findings", Route.ENGINEER, "the quality gate failed on the code (pass rate, coverage, lint)",
         lambda f: f.source == Source.QUALITY_GATE and bool(f.gate_reasons)),
)
NO_RULE = Rule("no_rule_matched", Route.OPERATOR, "nothing recognised: a permanent error or an unlisted bug, an "
               "operator looks",
               lambda f: True)


@dataclass(frozen=True)
class Routing:
    route: Route
    first: str  # the rule that decided
    matched: tuple[str, ...]  # every rule that matched, in order
    trace: tuple[dict, ...]  # every rule evaluated: name, route, matched, because

    def to_dict(self) -> dict:
        return {"route": str(self.route), "first": self.first, "matched": list(self.matched),
                "trace": list(self.trace)}


def classify(failure: Failure, rules: tuple[Rule, ...] = RULES) -> Routing:
    """Evaluate every rule in order; the first match wins, all matches are kept in the trace."""
    trace = tuple({"rule": r.name, "route": str(r.route), "matched": r.test(failure), "because": r.because}
                  for r in rules)
    matched = tuple(step["rule"] for step in trace if step["matched"])
    first = next((r for r in rules if r.name in matched), NO_RULE)
    return Routing(route=first.route, first=first.name, matched=matched, trace=trace)


def error_classes(exc: BaseException) -> tuple[str, ...]:
    """The exception's class names, most specific first, as rules match them."""
    return tuple(cls.__name__ for cls in type(exc).__mro__ if cls not in (object, BaseException))
