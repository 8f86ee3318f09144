"""A repository's tests in the sandbox, with its prepared environment: one run, and the baseline's two."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import agents.environments.pyconfig as pyconfig
from agents.environments.baseline import Baseline, baseline_from
from agents.environments.prepare import Environment
from agents.environments.testcmd import TestCommand
from agents.sandbox.isolation import SandboxLimits
from agents.sandbox.report import TestReport
from agents.sandbox.runner import DEFAULT_LIMITS, RepoRun, RepoTests, run_repository_tests


@dataclass(frozen=True)
class BaselineRuns:
    baseline: Baseline
    reports: tuple[TestReport, TestReport]  # for the gate page: durations, output, isolation, tampering
    outcomes: tuple[dict[str, str], dict[str, str]] = ({}, {})  # each run's, as stored with the baseline


def repo_tests(checkout: Path, command: TestCommand, environment: Environment, *,
               expected: Iterable[str] = ()) -> RepoTests:
    """configured: whether pytest finds a configuration file of the checkout's, as it reads them when it starts."""
    named = any(arg in ("-c", "--config-file") or arg.startswith("--config-file=") for arg in command.args)
    return RepoTests(venv=environment.venv, args=command.args, paths=command.paths, pythonpath=command.pythonpath,
                     expected=tuple(expected), configured=named or pyconfig.pytest_config(checkout) is not None)


def run_repository(checkout: Path, command: TestCommand, environment: Environment, *,
                   limits: SandboxLimits = DEFAULT_LIMITS, expected: Iterable[str] = ()) -> RepoRun:
    """One sandboxed run of the checkout's tests. expected: tests the report must mention (reproductions)."""
    return run_repository_tests(checkout, repo_tests(checkout, command, environment, expected=expected),
                                limits=limits)


def run_baseline(checkout: Path, command: TestCommand, environment: Environment, *,
                 limits: SandboxLimits = DEFAULT_LIMITS) -> BaselineRuns:
    """The base commit's tests, twice: what differs between the runs is flaky. A first run stopped at the time
    limit is not repeated (its report stands for both): the second would be stopped there too."""
    first = run_repository(checkout, command, environment, limits=limits)
    second = first if first.report.timed_out else run_repository(checkout, command, environment, limits=limits)
    return BaselineRuns(baseline_from(first.outcomes, second.outcomes), (first.report, second.report),
                        (first.outcomes, second.outcomes))
