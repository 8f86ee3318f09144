"""Step time budgets and the invariant that keeps them in order.

A step makes up to (1 + repairs) model calls; each may take timeout × (retries + 1) plus
the SDK's backoff. That must finish within the step's soft limit. A task may run further
steps inline, but only ones that start within the inline window, so Celery's soft limit
for the task is the step's plus that window: every step keeps its whole budget. Then the
soft limit comes before the hard limit. A running step renews its lease every third of the
lease (lifecycle.services.leases.heartbeat), so the lease is short: it is how long a dead
worker's step waits before the reaper re-queues it, not how long a step may run. The lease
comes before the broker's visibility timeout (so the reaper, not a redelivery an hour later,
recovers a lost step).
"""
from __future__ import annotations

from dataclasses import dataclass

from aiteam.env import env_float, env_int

SDK_MAX_BACKOFF_S = 8.0  # anthropic SDK's MAX_RETRY_DELAY
STRUCTURED_REPAIRS = 2


@dataclass(frozen=True)
class StepTimeouts:
    llm_timeout: float
    llm_max_retries: int
    soft_time_limit: float
    hard_time_limit: float
    lease: float
    visibility_timeout: float
    inline_window: float = 0.0

    @classmethod
    def from_env(cls) -> StepTimeouts:
        timeout = env_float("AITEAM_LLM_TIMEOUT_S", 60.0)
        retries = env_int("AITEAM_LLM_MAX_RETRIES", 2)
        soft = env_float("AITEAM_STEP_SOFT_LIMIT_S", 600.0)
        window = env_float("AITEAM_STEP_INLINE_WINDOW_S", 5.0)
        hard = env_float("AITEAM_STEP_HARD_LIMIT_S", soft + window + 60)
        lease = env_float("AITEAM_STEP_LEASE_S", 60.0)
        visibility = env_float("AITEAM_VISIBILITY_TIMEOUT_S", max(3600.0, lease * 2))
        return cls(timeout, retries, soft, hard, lease, visibility, window)

    @property
    def task_soft_limit(self) -> float:
        """Celery's soft limit for a run_step task: a step that starts inline late in the window keeps its budget."""
        return self.soft_time_limit + self.inline_window

    @property
    def heartbeat(self) -> float:
        """How often a running step renews its lease."""
        return self.lease / 3

    @property
    def llm_worst_case(self) -> float:
        per_call = self.llm_timeout * (self.llm_max_retries + 1) + self.llm_max_retries * SDK_MAX_BACKOFF_S
        return per_call * (STRUCTURED_REPAIRS + 1)

    def problems(self) -> list[str]:
        if self.inline_window < 0:
            return [f"the inline window ({self.inline_window:.0f}s) cannot be negative"]
        step = [("LLM worst case", self.llm_worst_case), ("soft time limit", self.soft_time_limit)]
        task = [("soft time limit plus the inline window", self.task_soft_limit), ("hard time limit", self.hard_time_limit)]
        lease = [("step lease", self.lease), ("visibility timeout", self.visibility_timeout)]
        return _out_of_order(step) + _out_of_order(task) + _out_of_order(lease)


def _out_of_order(chain: list[tuple[str, float]]) -> list[str]:
    return [
        f"{a} ({va:.0f}s) must be below {b} ({vb:.0f}s)"
        for (a, va), (b, vb) in zip(chain, chain[1:], strict=False)
        if not va < vb
    ]
