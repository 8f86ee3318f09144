"""End-to-end time of N requirements against their critical path, on real PostgreSQL, Redis
and two Celery workers, with a fake LLM of fixed latency (replay with AITEAM_REPLAY_LATENCY_MS).

The critical path of one requirement is the sum of model latencies along its longest
dependency chain (PO → BA → architect → design review → plan → max(T1, T2) → T3 → fix →
code review) plus its sandbox runs, all taken from what was recorded. A ratio near 1.0
means the orchestration adds little; above 1.0 is queueing and overhead.

Then where the time over the critical path goes along that chain (bench/_timeline.py): hand-offs,
queue waits, the steps' own work; --detail shows each link.

    python bench/pipeline_ratio.py [--requirements 4] [--latency-ms 300] [--concurrency 2]
                                   [--layout mixed|split|split-io [--llm-pool threads|prefork] [--llm-concurrency 16]]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._services import (  # noqa: E402
    BROKER,
    LAYOUTS,
    cpu_seconds,
    describe,
    machine_busy_seconds,
    scratch_database,
    server_cpu_seconds,
    start_layout,
    stop,
    worker_layout,
)
from bench._timeline import model_seconds, print_breakdowns  # noqa: E402

CHAIN = ["po_clarify", "ba_stories", "architect_spec", "tl_design_review", "tl_plan", "engineer:T1|engineer:T2",
         "engineer:T3", "self_test", "engineer_fix", "self_test", "tl_code_review"]


def main() -> None:
    args = parse()
    with scratch_database("aiteam_bench_pipeline") as url, tempfile.TemporaryDirectory() as tmp:
        env = {"DATABASE_URL": url, "CELERY_BROKER_URL": BROKER, "AITEAM_AUTONOMOUS": "true",
               "AITEAM_REPLAY_LATENCY_MS": str(args.latency_ms), "AITEAM_WORKSPACE_ROOT": f"{tmp}/ws",
               "AITEAM_LOG_LEVEL": "WARNING"}
        os.environ.update(env)
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiteam.settings")
        django.setup()
        import redis

        redis.Redis.from_url(BROKER).flushdb()
        workers = start_layout(layout_of(args), env, Path(tmp))
        try:
            run(args, workers)
        finally:
            for w in workers:
                stop(w)


def run(args, workers) -> None:
    from django.contrib.auth import get_user_model

    from lifecycle.models import Membership, Organization, Project, Requirement
    from lifecycle.services.intake import requirement_submit
    from tests.flows import SAMPLE

    org = Organization.objects.create(slug="bench", name="bench")
    Project.objects.create(organization=org, slug="default", name="bench")
    user = get_user_model().objects.create(username="bench")
    Membership.objects.create(user=user, organization=org, role="admin")
    cpu = CpuUse(workers)
    started = time.monotonic()
    ids = [requirement_submit(user=user, brief=SAMPLE, title=f"bench {i}").pk for i in range(args.requirements)]
    while Requirement.objects.filter(pk__in=ids, state="test_pending").count() < len(ids):
        if time.monotonic() - started > args.timeout:
            sys.exit(f"timed out; states: {list(Requirement.objects.filter(pk__in=ids).values_list('state', flat=True))}")
        time.sleep(0.1)
    wall = time.monotonic() - started
    report(args, ids, wall, cpu.since())


class CpuUse:
    """CPU spent from now on: the whole machine's (every process, the sandboxed runs included), the workers' own
    (their pool processes and the git processes they waited for), PostgreSQL's, Redis's and this script's."""

    def __init__(self, workers) -> None:
        self.pids = [w.pid for w in workers]
        self.start = self._now()

    def _now(self) -> dict[str, float]:
        machine, steal = machine_busy_seconds()
        mine = os.times()
        return {"machine": machine, "steal": steal, "workers": sum(cpu_seconds(pid) for pid in self.pids),
                "postgres": server_cpu_seconds("postgres"), "redis": server_cpu_seconds("redis-server"),
                "script": mine.user + mine.system}

    def since(self) -> dict[str, float]:
        return {key: value - self.start[key] for key, value in self._now().items()}


def report(args, ids, wall: float, cpu: dict[str, float]) -> None:
    from lifecycle.models import Requirement

    e2e, critical = [], []
    for req in Requirement.objects.filter(pk__in=ids):
        first = req.transitions.order_by("created_at").first().created_at
        last = req.transitions.order_by("-created_at").first().created_at
        e2e.append((last - first).total_seconds())
        critical.append(critical_path_seconds(req))
    ratios = [e / c for e, c in zip(e2e, critical, strict=True)]
    print(f"requirements: {args.requirements}, fake LLM latency {args.latency_ms} ms, workers: {describe(layout_of(args))}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"critical path per requirement (median): {statistics.median(critical):.2f} s")
    print(f"end-to-end per requirement (median):    {statistics.median(e2e):.2f} s")
    print(f"ratio end-to-end / critical path: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")
    print(f"all {args.requirements} done in {wall:.2f} s (ideal with unlimited workers: {max(critical):.2f} s)")
    print_cpu_floor(cpu, wall, statistics.median(critical))
    print_breakdowns(Requirement.objects.filter(pk__in=ids), CHAIN, detail=args.detail)


def print_cpu_floor(cpu: dict[str, float], wall: float, critical: float) -> None:
    """The last requirement cannot end before the machine has done all of the run's CPU work: busy CPU / cores is
    a floor under the time all of them take, whatever the scheduling, at this much work a step and with whatever
    else runs on the machine (the load average above); over the median critical path, a floor for the ratio of
    the requirements that end last."""
    cores = os.cpu_count() or 1
    busy = cpu["machine"]
    rest = busy - cpu["workers"] - cpu["postgres"] - cpu["redis"] - cpu["script"]
    print(f"CPU busy during the run: {busy:.1f} s of {cores} x {wall:.2f} s ({100 * busy / (cores * wall):.0f} %): "
          f"workers {cpu['workers']:.1f} s, PostgreSQL {cpu['postgres']:.1f} s, Redis {cpu['redis']:.1f} s, "
          f"this script {cpu['script']:.1f} s, the rest {rest:.1f} s (the sandboxed test runs, and anything else "
          f"running); steal {cpu['steal']:.1f} s")
    floor = busy / cores
    print(f"CPU floor: no scheduling ends all of them before {floor:.2f} s on {cores} cores, "
          f"{floor / critical:.2f} times the median critical path")


def critical_path_seconds(req) -> float:
    """Recorded model latency (and sandbox duration) along the longest chain of one requirement."""
    total = 0.0
    attempts = {"self_test": iter([1, 2])}
    for link in CHAIN:
        options = []
        for key in link.split("|"):
            steps = req.steps.filter(key=key)
            if key in attempts:
                steps = steps.filter(attempt=next(attempts[key]))
            step = steps.order_by("attempt").first()
            options.append(model_seconds(step))
        total += max(options)
    return total


def layout_of(args):
    return worker_layout(args.layout, concurrency=args.concurrency, llm_pool=args.llm_pool,
                         llm_concurrency=args.llm_concurrency, llm_workers=args.llm_workers)


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requirements", type=int, default=4)
    parser.add_argument("--latency-ms", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=2, help="processes per prefork worker")
    parser.add_argument("--layout", choices=LAYOUTS, default="mixed",
                        help="mixed: 2 prefork workers on every queue; split: llm on threads, sandbox on processes")
    parser.add_argument("--llm-pool", choices=["threads", "prefork"], default="threads", help="the llm worker's pool (split)")
    parser.add_argument("--llm-workers", type=int, default=1, help="how many llm workers (split, split-io)")
    parser.add_argument("--llm-concurrency", type=int, default=16, help="the llm worker's pool size (split)")
    parser.add_argument("--detail", action="store_true", help="each link of the critical chain, median over requirements")
    parser.add_argument("--timeout", type=float, default=600)
    return parser.parse_args()


if __name__ == "__main__":
    main()
