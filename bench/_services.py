"""Shared plumbing for benchmarks: a throwaway PostgreSQL database, migrations, Celery workers."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/12")  # tests use 13-15


@contextmanager
def scratch_database(name: str, broker: str = BROKER, *, migrate: bool = True):
    """Create `name` empty, migrate it (unless migrate=False), and drop it afterwards; yields its DATABASE_URL."""
    admin = psycopg.connect(f"{PG}/postgres", autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{PG}/{name}"
    try:
        if migrate:
            subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True,
                           env={**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": broker})
        yield url
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


Worker = tuple[str, str, str, int]  # node name, queues, pool, concurrency
LAYOUTS = ("mixed", "split", "split-io")


def worker_layout(layout: str, *, concurrency: int, llm_pool: str = "threads", llm_concurrency: int = 16,
                  llm_workers: int = 1) -> list[Worker]:
    """mixed: the Procfile's worker before the split (every queue, prefork -c `concurrency`), twice;
    split: model calls on an `llm_pool` of `llm_concurrency`, the sandbox and the default queue on processes;
    split-io: the default queue (notifications, delivery: network waits) with the model calls, the sandbox alone.
    llm_workers: how many such llm workers (split, split-io): one interpreter lock each."""
    if layout == "mixed":
        return [(f"bench{i}", "llm,sandbox,default", "prefork", concurrency) for i in range(2)]
    llm_queues, sandbox_queues = ("llm", "sandbox,default") if layout == "split" else ("llm,default", "sandbox")
    names = ["llm"] if llm_workers == 1 else [f"llm{i}" for i in range(llm_workers)]
    return [*((name, llm_queues, llm_pool, llm_concurrency) for name in names),
            ("sandbox", sandbox_queues, "prefork", concurrency)]


def start_layout(workers: list[Worker], env: dict[str, str], logs: Path) -> list[subprocess.Popen]:
    """Start each worker and wait until every one of them takes tasks."""
    started = [start_worker(name, env, n, logs / f"{name}.log", queues=queues, pool=pool)
               for name, queues, pool, n in workers]
    wait_consumers([name for name, *_ in workers])
    return started


def describe(workers: list[Worker]) -> str:
    return ", ".join(f"-Q {queues} -P {pool} -c {n}" for _, queues, pool, n in workers)


def start_worker(name: str, env: dict[str, str], concurrency: int, log: Path, *,
                 queues: str = "llm,sandbox,default", wait_ready: float = 0.0, app: str = "aiteam",
                 pool: str = "prefork") -> subprocess.Popen:
    """A worker (prefork unless `pool` says otherwise) consuming `queues`, in its own process group. With
    wait_ready > 0, wait up to that many seconds for a prefork pool's processes to exist (the log is at WARNING,
    so Celery's "ready." line is not there to watch); the consumer may still be connecting then, so callers warm
    it up before they measure (or wait_consumers)."""
    command = [sys.executable, "-m", "celery", "-A", app, "worker", "-Q", queues, "-c",
               str(concurrency), "-P", pool, "-n", f"{name}@%h", "--without-mingle", "--without-gossip",
               "-l", "WARNING"]
    # AITEAM_SANDBOX_ALLOW_UNISOLATED: as the embedded default, so a non-root machine can run the pipeline benches
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "AITEAM_SANDBOX_ALLOW_UNISOLATED": "1", **env},
                               stdout=log.open("w"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    time.sleep(0.5)
    deadline = time.monotonic() + wait_ready
    while pool == "prefork" and time.monotonic() < deadline and len(pool_children(process.pid)) < concurrency:
        if process.poll() is not None:
            raise RuntimeError(f"worker {name} exited with {process.returncode}; see {log}")
        time.sleep(0.1)
    return process


def wait_consumers(names: list[str], timeout: float = 60.0) -> None:
    """Until every named worker answers a ping: its consumer is connected, so a task sent now is taken at once."""
    import socket

    from aiteam.celery import app

    wanted = {f"{name}@{socket.gethostname()}" for name in names}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answered = {host for reply in app.control.ping(timeout=0.5) for host in reply}
        if wanted <= answered:
            return
    raise RuntimeError(f"workers {sorted(wanted)} did not answer within {timeout:.0f} s")


def pool_children(pid: int) -> list[int]:
    """The prefork pool's process ids (children of the worker's main process)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its pool processes, with the children each has waited for (git; the
    sandboxed test runs do not show here: machine_busy_seconds counts them)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in [pid, *pool_children(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(float(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / ticks


def machine_busy_seconds() -> tuple[float, float]:
    """CPU seconds the whole machine spent busy since boot (every process: workers, their sandboxed runs,
    PostgreSQL, Redis, anything else running) and the seconds a hypervisor gave to other guests (steal)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9])
    ticks = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / ticks, steal / ticks


def server_cpu_seconds(name: str) -> float:
    """User + system CPU of the processes called `name` (postgres, redis-server), with what the first of them (the
    server's parent process) has from children that ended: PostgreSQL's backends come and go."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                head, rest = (entry / "stat").read_text().rsplit(")", 1)
            except OSError:
                continue
            if head.split("(", 1)[1] == name:
                fields = rest.split()
                stats[int(entry.name)] = (int(fields[1]), [float(f) for f in fields[11:15]])
    total = 0.0
    for parent, (utime, stime, cutime, cstime) in stats.values():
        total += utime + stime + (0 if parent in stats else cutime + cstime)
    return total / ticks


def stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, 15)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
