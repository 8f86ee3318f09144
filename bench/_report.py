"""Small helpers the benchmarks share for printing: the machine, versions, percentiles."""
from __future__ import annotations

import math
import os
import platform
import statistics
from importlib import metadata

BENCH_BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/12")  # not 13-15: the tests use those


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(values: list[float]) -> str:
    return (f"median {statistics.median(values):7.2f}  p95 {percentile(values, 95):7.2f}  "
            f"min {min(values):7.2f}  max {max(values):7.2f}  (n={len(values)})")


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions(*packages: str) -> str:
    out = []
    for name in packages:
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return ", ".join(out)


def server_versions(database_url: str | None = None, broker_url: str | None = None) -> str:
    parts = []
    if database_url:
        import psycopg

        with psycopg.connect(database_url) as conn:
            parts.append(f"PostgreSQL {conn.execute('SHOW server_version').fetchone()[0]}")
    if broker_url:
        import redis

        parts.append(f"Redis {redis.Redis.from_url(broker_url).info('server')['redis_version']}")
    return ", ".join(parts)


def print_machine(*packages: str, database_url: str | None = None, broker_url: str | None = None) -> None:
    print(f"machine: nproc {os.cpu_count()} ({len(os.sched_getaffinity(0))} usable), CPU {cpu_model()}, "
          f"{platform.system()} {platform.release()}, Python {platform.python_version()}")
    print(f"load average before the run: {open('/proc/loadavg').read().split()[:3]} (other work on the machine skews figures)")
    print(f"versions: {versions(*packages)}")
    servers = server_versions(database_url, broker_url)
    if servers:
        print(f"servers: {servers}")


def rss_kb(pid: int) -> int:
    """VmRSS of a process in kB (0 if it is gone)."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def print_load_after() -> None:
    """The load average when the run ended: well above the cores this run used means other work shared them."""
    print(f"load average after the run: {open('/proc/loadavg').read().split()[:3]} on {os.cpu_count()} cores")
