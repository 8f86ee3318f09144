"""The sandbox runner: generated code and its tests run only here, never in the worker's own process."""
from agents.sandbox.isolation import SandboxLimits, bwrap_available
from agents.sandbox.report import TestReport
from agents.sandbox.runner import DEFAULT_LIMITS, empty_trash, run_tests, sandbox_root

__all__ = ["DEFAULT_LIMITS", "SandboxLimits", "TestReport", "bwrap_available", "empty_trash", "run_tests", "sandbox_root"]
