"""An existing repository's environment and tests (issue 23, parts 3 and 4). ADR 0032.

    command = detect_test_command(checkout, configured=project_setting)        # testcmd.py
    env = prepare_environment(checkout, cache_dir=..., sources=PackageSources(...),
                              runner_packages=("pytest", *command.plugins))     # prepare.py (network)
    base = run_baseline(checkout, command, env)                                 # run.py (sandbox, no network)
    after = run_repository(changed_checkout, command, env, expected=repro_ids)
    result = compare(base.baseline, after.outcomes, reproductions=repro_ids,
                     reproductions_at_base=run_repository(base_plus_repro, command, env).outcomes)

Errors a human must see: NotPython and BadTestCommand (testcmd), BadDependencies (requirements),
InstallFailed with its log tail (prepare). Nothing here imports the ORM or lifecycle.
"""
from agents.environments.baseline import Baseline, Comparison, Reproduction, baseline_from, compare
from agents.environments.prepare import Environment, InstallFailed, PackageSources, prepare_environment
from agents.environments.requirements import BadDependencies
from agents.environments.run import BaselineRuns, run_baseline, run_repository
from agents.environments.testcmd import BadTestCommand, NotPython, TestCommand, detect_test_command

__all__ = ["BadDependencies", "BadTestCommand", "Baseline", "BaselineRuns", "Comparison", "Environment",
           "InstallFailed", "NotPython", "PackageSources", "Reproduction", "TestCommand", "baseline_from", "compare",
           "detect_test_command", "prepare_environment", "run_baseline", "run_repository"]
