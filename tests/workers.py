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
                 concurrency: int = 2, llm_pool: str = "threads", llm_concurrency: int = 8, beat: bool = False,
                 default_timings: bool = False, **env: str) -> None:
        """As the Procfile runs them (llm_pool="threads"): llm and default on a thread pool of `llm_concurrency`,
        sandbox on `concurrency` prefork processes, two worker processes; llm_pool="prefork": one prefork worker
        of `concurrency` processes on every queue."""
        self.name, self.workdir, self.beat = name, Path(workdir), beat
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.concurrency, self.llm_pool, self.llm_concurrency = concurrency, llm_pool, llm_concurrency
        timings = {} if default_timings else FAST_STEPS  # default_timings: the budgets a deployment runs with
        self.env = {**os.environ, **timings, **WORKER_ENV, "DATABASE_URL": database_url, "CELERY_BROKER_URL": broker_url,
                    "AITEAM_REPLAY_CASSETTE": str(settings.AITEAM_REPLAY_CASSETTE), "CI": "",
                    "PGAPPNAME": f"aiteam-worker-{name}", **env}  # libpq labels the worker's DB connections
        self.env.pop("ANTHROPIC_API_KEY", None)
        self.processes: list[subprocess.Popen] = []

    def start(self) -> Worker:
        if self.llm_pool == "prefork":
            self.processes = [self._spawn("worker", "llm,sandbox,default", "prefork", self.concurrency, beat=self.beat)]
        else:
            self.processes = [self._spawn("worker", "llm,default", self.llm_pool, self.llm_concurrency, beat=self.beat),
                              self._spawn("sandbox", "sandbox", "prefork", self.concurrency)]
        self.process = self.processes[0]  # the one that runs run_step
        for log in self.logs:
            wait_for(lambda log=log: "ready." in log.read_text(errors="replace"), timeout=30,
                     what=f"worker {self.name} ({log.stem}) to be ready")
        Worker.running.add(self)
        return self

    def _spawn(self, part: str, queues: str, pool: str, concurrency: int, *, beat: bool = False) -> subprocess.Popen:
        node = self.name if part == "worker" else f"{self.name}-{part}"
        command = [sys.executable, "-m", "celery", "-A", "aiteam", "worker", "-Q", queues, "-c", str(concurrency),
                   "-P", pool, "-n", f"{node}@%h", "--without-mingle", "--without-gossip", "-l", "INFO"]
        if beat:
            command += ["-B", "--scheduler", "celery.beat:PersistentScheduler", "-s", str(self.workdir / "beat-schedule")]
        log = self.workdir / f"{part}.log"
        env = self.env if part == "worker" else {**self.env, "PGAPPNAME": f"{self.env['PGAPPNAME']}-{part}"}
        with log.open("w") as out:
            return subprocess.Popen(command, env=env, cwd=settings.BASE_DIR, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    @property
    def logs(self) -> list[Path]:
        return [self.workdir / f"{part}.log" for part in ("worker", "sandbox")[:len(self.processes)]]

    def output(self) -> str:
        return "".join(log.read_text(errors="replace") for log in self.logs)

    def pool_children(self) -> list[int]:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return [int(pid) for pid in children]

    def kill_group(self) -> None:
        """SIGKILL the worker and everything in its process groups: no chance to ack or clean up."""
        Worker.running.discard(self)
        for process in self.processes:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def stop(self) -> None:
        Worker.running.discard(self)
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

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
