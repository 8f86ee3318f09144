"""Throughput of one machine: N requirements (default 200) submitted at once, a fake model answering in
AITEAM_REPLAY_LATENCY_MS (default 2 s, the replay cassette as bench/pipeline_ratio.py uses it), real
PostgreSQL, Redis and Celery workers laid out as the Procfile does (bench/_services.worker_layout).

A requirement is finished when it reaches ready_to_deploy (QC and DevOps done; autonomous mode leaves the
deployment to a person), or test_pending with --until test_pending (as pipeline_ratio does). Prints requirements finished
per minute (over the whole run, and between the 10th and 90th percentile of finishes), model calls in flight
(LLM call rows overlapping in time: a call's row is written when it returns, latency_ms after it began;
the peak, and the average from the first call to the last), each worker's memory (peak RSS of its processes
together, sampled every second) and CPU (user + system seconds over the run, as a share of one core),
the database connections the run held at most, and how long messages waited on the llm and sandbox queues.

    python bench/throughput.py [--requirements 200] [--latency-ms 2000] [--layout split-io] [--llm-concurrency 64]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._report import print_load_after, print_machine, rss_kb  # noqa: E402
from bench._services import (  # noqa: E402
    BROKER,
    LAYOUTS,
    cpu_seconds,
    describe,
    pool_children,
    scratch_database,
    start_layout,
    stop,
    worker_layout,
)

STOPPED = ("blocked", "escalated", "cancelled")


def main() -> None:
    args = parse()
    os.environ.pop("ANTHROPIC_API_KEY", None)
    with scratch_database("aiteam_bench_throughput") as url, tempfile.TemporaryDirectory() as tmp:
        env = {"DATABASE_URL": url, "CELERY_BROKER_URL": BROKER, "AITEAM_AUTONOMOUS": "true",
               "AITEAM_LLM_PROVIDER": "replay", "AITEAM_REPLAY_LATENCY_MS": str(args.latency_ms),
               "AITEAM_WORKSPACE_ROOT": f"{tmp}/ws", "AITEAM_LOG_LEVEL": "WARNING",
               "DJANGO_SETTINGS_MODULE": "aiteam.settings"}
        os.environ.update(env)
        import django

        django.setup()
        import redis

        redis.Redis.from_url(BROKER).flushdb()
        layout = worker_layout(args.layout, concurrency=args.concurrency, llm_pool=args.llm_pool,
                               llm_concurrency=args.llm_concurrency, llm_workers=args.llm_workers)
        print_machine("Django", "celery", "kombu", "psycopg", database_url=url, broker_url=BROKER)
        print(f"requirements: {args.requirements} at once, fake model {args.latency_ms} ms; workers: {describe(layout)}")
        workers = start_layout(layout, env, Path(tmp))
        try:
            run(args, {name: w.pid for (name, *_), w in zip(layout, workers, strict=True)}, url,
                sandbox_slots=sum(n for _, queues, _, n in layout if "sandbox" in queues.split(",")))
        finally:
            for w in workers:
                stop(w)
        for name, *_ in layout:
            lines = (Path(tmp) / f"{name}.log").read_text().splitlines()
            problems = [line for line in lines if "WARNING" in line or "ERROR" in line or "Traceback" in line]
            print(f"worker {name} log: {len(problems)} warnings or errors" + (f"; first: {problems[0][:200]}"
                                                                               if problems else ""))
        print_load_after()


class Sampler:
    """Every second: each worker's RSS (main process and pool processes together) and the database's connections."""

    def __init__(self, pids: dict[str, int], database: str) -> None:
        self.pids, self.database = pids, database
        self.rss_mb = dict.fromkeys(pids, 0.0)
        self.connections = 0
        self.waiting: dict[str, list[int]] = {"llm": [], "sandbox": []}  # messages on each broker queue, each second
        self.cpu_start = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.cpu = dict.fromkeys(pids, 0.0)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psycopg
        import redis

        from bench._services import PG

        broker = redis.Redis.from_url(BROKER)
        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            while not self.stop.wait(1.0):
                self.sample(conn)
                for queue, counts in self.waiting.items():
                    counts.append(broker.llen(queue))

    def sample(self, conn) -> None:
        for name, pid in self.pids.items():
            rss = sum(rss_kb(p) for p in [pid, *pool_children(pid)]) / 1024
            self.rss_mb[name] = max(self.rss_mb[name], rss)
            self.cpu[name] = cpu_seconds(pid) - self.cpu_start[name]
        held = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [self.database]).fetchone()[0]
        self.connections = max(self.connections, held)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def run(args, pids: dict[str, int], url: str, *, sandbox_slots: int) -> None:
    from django.contrib.auth import get_user_model

    from lifecycle.models import Membership, Organization, Project, Requirement
    from lifecycle.services.intake import requirement_submit
    from tests.flows import SAMPLE

    org = Organization.objects.create(slug="bench", name="bench")
    Project.objects.create(organization=org, slug="default", name="bench")
    user = get_user_model().objects.create(username="bench")
    Membership.objects.create(user=user, organization=org, role="admin")
    with Sampler(pids, url.rsplit("/", 1)[1]) as sampler:
        started = time.time()
        ids = [requirement_submit(user=user, brief=SAMPLE, title=f"throughput {i}").pk for i in range(args.requirements)]
        submitted = time.time() - started
        while True:
            states = list(Requirement.objects.filter(pk__in=ids).values_list("state", flat=True))
            waiting = len(states) - sum(s == args.until or s in STOPPED for s in states) - len(failed_steps(ids))
            if waiting <= 0 or time.time() - started > args.timeout:
                break
            time.sleep(1.0)
        wall = time.time() - started
    report(args, ids, (started, wall, submitted), sampler, states)
    sandbox_share(ids, wall, sandbox_slots)
    print_backlogs(sampler.waiting)


def failed_steps(ids: list[int]) -> list[tuple[str, str]]:
    """(step key, error) of each failed step: its requirement waits for a person, so the run does not wait for it."""
    from lifecycle.models import Step

    return list(Step.objects.filter(requirement_id__in=ids, state="failed").values_list("key", "error"))


def report(args, ids: list[int], times: tuple[float, float, float], sampler: Sampler, states: list[str]) -> None:
    from lifecycle.models import LLMCall, StateTransition

    started, wall, submitted = times
    finishes = sorted(t.timestamp() - started for t in StateTransition.objects.filter(
        requirement_id__in=ids, to_state=args.until).values_list("created_at", flat=True))
    done = len(finishes)
    print(f"submitted in {submitted:.1f} s; finished {done} of {len(ids)} in {wall:.1f} s"
          + (f" (others: {sorted(set(states) - {args.until})})" if done < len(ids) else ""))
    for key, error in failed_steps(ids):
        print(f"  failed step {key}: {error[:160]}")
    if done:
        print(f"first finished at {finishes[0]:.1f} s, last at {finishes[-1]:.1f} s; "
              f"requirements finished per minute: {60 * done / finishes[-1]:.1f} over the run", end="")
        lo, hi = finishes[done // 10], finishes[(9 * done) // 10 - 1] if done >= 10 else finishes[-1]
        if hi > lo:
            print(f", {60 * ((9 * done) // 10 - done // 10) / (hi - lo):.1f} between the 10th and 90th percentile")
        else:
            print()
    calls = list(LLMCall.objects.filter(requirement_id__in=ids).values_list("created_at", "latency_ms"))
    peak, mean = in_flight([(end.timestamp() - ms / 1000, end.timestamp()) for end, ms in calls])
    print(f"model calls: {len(calls)}; in flight at most {peak}, on average {mean:.1f} (first call to last)")
    for name, mb in sampler.rss_mb.items():
        print(f"worker {name}: peak RSS {mb:.0f} MB (main and pool processes), CPU {sampler.cpu[name]:.1f} s "
              f"= {100 * sampler.cpu[name] / wall:.0f} % of one core")
    print(f"database connections held at most: {sampler.connections}")


def sandbox_share(ids: list[int], wall: float, slots: int) -> None:
    """How busy the sandbox worker's processes were: its steps' time from claim to finish against slots × wall,
    and how much of a step the test run itself took (its report's duration_s)."""
    from lifecycle.models import Artifact, Step

    steps = list(Step.objects.filter(requirement_id__in=ids, key__in=["self_test", "qc_run"], state="done")
                 .values_list("started_at", "finished_at"))
    busy = sum((b - a).total_seconds() for a, b in steps)
    runs = [m.get("duration_s", 0) for m in Artifact.objects.filter(
        requirement_id__in=ids, kind="test_report").values_list("metadata", flat=True)]
    if steps:
        print(f"sandbox steps: {len(steps)}, {busy / len(steps):.2f} s each on average (test run "
              f"{statistics.median(runs) if runs else 0:.2f} s median); busy {100 * busy / (slots * wall):.0f} % of "
              f"{slots} processes × the run")


def print_backlogs(waiting: dict[str, list[int]]) -> None:
    """Which queue work waited on: a queue never empty limits the run; one always empty waits for the others."""
    for queue, counts in waiting.items():
        busy = [c for c in counts if c]
        print(f"broker queue {queue}: messages waiting at most {max(counts, default=0)}, "
              f"in {len(busy)} of {len(counts)} seconds")


def in_flight(intervals: list[tuple[float, float]]) -> tuple[int, float]:
    """The most intervals open at one instant, and how many were open on average from the first start to the last end."""
    if not intervals:
        return 0, 0.0
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    peak = current = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    span = max(b for _, b in intervals) - min(a for a, _ in intervals)
    return peak, sum(b - a for a, b in intervals) / span


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requirements", type=int, default=200)
    parser.add_argument("--latency-ms", type=int, default=2000)
    parser.add_argument("--layout", choices=LAYOUTS, default="split-io")  # as the Procfile runs them
    parser.add_argument("--concurrency", type=int, default=2, help="processes per prefork worker")
    parser.add_argument("--llm-pool", choices=["threads", "prefork"], default="threads")
    parser.add_argument("--llm-workers", type=int, default=1, help="how many llm workers (split, split-io)")
    parser.add_argument("--llm-concurrency", type=int, default=64)
    parser.add_argument("--until", choices=["test_pending", "ready_to_deploy"], default="ready_to_deploy",
                        help="the state that counts as finished: after code review, or after QC and DevOps")
    parser.add_argument("--timeout", type=float, default=900)
    return parser.parse_args()


if __name__ == "__main__":
    main()
