"""Real Celery worker processes for integration tests, each in its own process group."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

# Short budgets so a lost step is recovered within seconds; they keep the invariant in order.
FAST_STEPS = {
    "AITEAM_LLM_TIMEOUT_S": "0.5", "AITEAM_LLM_MAX_RETRIES": "0",
    "AITEAM_STEP_SOFT_LIMIT_S": "8", "AITEAM_STEP_INLINE_WINDOW_S": "1", "AITEAM_STEP_HARD_LIMIT_S": "10",
    "AITEAM_STEP_LEASE_S": "11",
    "AITEAM_VISIBILITY_TIMEOUT_S": "3600", "AITEAM_REAPER_INTERVAL_S": "1", "AITEAM_RELAY_INTERVAL_S": "2",
}
WORKER_ENV = {
    "AITEAM_AUTONOMOUS": "false",
    # as the embedded default: a developer's machine that is not root can still run the sandbox (isolated as root)
    "AITEAM_SANDBOX_ALLOW_UNISOLATED": "1",
}


class Worker:
    running: set[Worker] = set()  # started and not yet stopped, for fixtures that wait for quiet

    def __init__(self, name: str, database_url: str, broker_url: str, workdir: Path, *,
                 concurrency: int = 2, beat: bool = False, default_timings: bool = False, **env: str) -> None:
        self.name, self.workdir, self.beat = name, Path(workdir), beat
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.concurrency = concurrency
        timings = {} if default_timings else FAST_STEPS  # default_timings: the budgets a deployment runs with
        self.env = {**os.environ, **timings, **WORKER_ENV, "DATABASE_URL": database_url, "CELERY_BROKER_URL": broker_url,
                    "AITEAM_REPLAY_CASSETTE": str(settings.AITEAM_REPLAY_CASSETTE), "CI": "",
                    "PGAPPNAME": f"aiteam-worker-{name}", **env}  # libpq labels the worker's DB connections
        self.env.pop("ANTHROPIC_API_KEY", None)
        self.process: subprocess.Popen | None = None

    def start(self) -> Worker:
        command = [sys.executable, "-m", "celery", "-A", "aiteam", "worker", "-Q", "llm,sandbox,default",
                   "-c", str(self.concurrency), "-P", "prefork", "-n", f"{self.name}@%h", "--without-mingle",
                   "--without-gossip", "-l", "INFO"]
        if self.beat:
            command += ["-B", "--scheduler", "celery.beat:PersistentScheduler", "-s", str(self.workdir / "beat-schedule")]
        self.log = (self.workdir / "worker.log").open("w")
        self.process = subprocess.Popen(command, env=self.env, cwd=settings.BASE_DIR, stdout=self.log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: "ready." in self.output(), timeout=30, what=f"worker {self.name} to be ready")
        Worker.running.add(self)
        return self

    def output(self) -> str:
        return (self.workdir / "worker.log").read_text(errors="replace")

    def pool_children(self) -> list[int]:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return [int(pid) for pid in children]

    def kill_group(self) -> None:
        """SIGKILL the worker and everything in its process group: no chance to ack or clean up."""
        Worker.running.discard(self)
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        Worker.running.discard(self)
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill_group()
        if self.process:
            self.log.close()

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_for(condition: Callable[[], object], *, timeout: float = 30, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
