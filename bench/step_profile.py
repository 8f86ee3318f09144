"""Where an aiteam step's time goes: the 8-step chain of bench/step_overhead.py on a worker whose run_step
phases are timed (bench/_instrumented.py), a few requirements one at a time, with inline continuation off
(AITEAM_STEP_INLINE_WINDOW_S=0) so that every task runs exactly one step.

Per step key, median ms over the requirements: the broker hop (the previous step's publish → task_prerun in
the pool process), claim (lease transaction), context (loading the agent's input), agent (the replay model at
0 ms, prompt rendering, output validation), apply (the service's transaction and commit, then the on-commit
outbox relay and the publish of the next step, shown apart), the rest of the task, and how many SQL
statements and subprocesses (git) it ran and how long they took.

    .venv/bin/python bench/step_profile.py [--requirements 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._report import BENCH_BROKER, print_machine  # noqa: E402
from bench._services import scratch_database, start_worker, stop  # noqa: E402
from bench.step_overhead import KEYS, submit, wait_done  # noqa: E402

COLUMNS = ["hop", "claim", "context", "agent", "apply", "relay", "publish", "other", "task_ms", "sql", "sql_n",
           "subprocess", "subprocess_n"]
HEADERS = {"subprocess": "subproc", "subprocess_n": "subproc_n", "task_ms": "task"}


def main() -> None:
    args = parse()
    os.environ.pop("ANTHROPIC_API_KEY", None)
    with tempfile.TemporaryDirectory() as tmp, scratch_database("aiteam_bench_step_profile", BENCH_BROKER) as url:
        profile_dir = Path(tmp) / "profile"
        profile_dir.mkdir()
        # one step per task (no inline continuation), so each task's phases belong to one step
        env = {"DATABASE_URL": url, "CELERY_BROKER_URL": BENCH_BROKER, "AITEAM_AUTONOMOUS": "true",
               "AITEAM_STEP_INLINE_WINDOW_S": "0",
               "AITEAM_LLM_PROVIDER": "replay", "AITEAM_REPLAY_LATENCY_MS": "0",
               "AITEAM_WORKSPACE_ROOT": f"{tmp}/ws", "AITEAM_REMOTES_ROOT": f"{tmp}/remotes",
               "AITEAM_LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "aiteam.settings",
               "BENCH_PROFILE_DIR": str(profile_dir)}
        os.environ.update(env)
        import django

        django.setup()
        import redis

        from bench import _instrumented

        _instrumented.install()  # records the publish of each requirement's first step from this process
        print_machine("Django", "celery", "kombu", database_url=url, broker_url=BENCH_BROKER)
        redis.Redis.from_url(BENCH_BROKER).flushdb()
        log = Path(tmp) / "worker.log"
        worker = start_worker("profile", env, args.concurrency, log, queues="llm,default", wait_ready=30,
                              app="bench._instrumented")
        try:
            ids = run(args)
        except BaseException:
            print("--- worker log (tail) ---\n" + log.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            stop(worker)
            redis.Redis.from_url(BENCH_BROKER).flushdb()
        report(args, ids, profile_dir)
        from django.db import connections

        connections.close_all()


def run(args) -> list:
    from django.contrib.auth import get_user_model

    from lifecycle.models import Membership, Organization, Project

    org = Organization.objects.create(slug="bench", name="bench")
    Project.objects.create(organization=org, slug="default", name="bench")
    user = get_user_model().objects.create(username="bench")
    Membership.objects.create(user=user, organization=org, role="admin")
    warm, _ = submit(user, "warm-up")
    wait_done([warm], 30)
    ids = []
    for i in range(args.requirements):
        rid, _ = submit(user, f"profiled {i}")
        wait_done([rid], 30)
        ids.append(rid)
    time.sleep(0.3)  # let the last postrun line land
    return ids


def report(args, ids: list, profile_dir: Path) -> None:
    from lifecycle.models import Step

    tasks, published = {}, {}
    for path in profile_dir.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "published" in record:
                published[record["published"]] = record["t"]
            elif record.get("task") == "lifecycle.runner.run_step":
                tasks[record["step_id"]] = record
    by_key: dict[str, dict[str, list[float]]] = {key: {c: [] for c in COLUMNS} for key in KEYS}
    connects = 0
    for step in Step.objects.filter(requirement_id__in=ids, key__in=KEYS):
        r = tasks.get(step.pk)
        if r is None or step.pk not in published:
            continue
        connects += r.get("connect_n", 0)
        values = {c: r.get(c, 0.0) for c in COLUMNS}
        values["hop"] = (r["t_prerun"] - published[step.pk]) * 1000
        values["apply"] = r.get("apply", 0.0) - r.get("relay", 0.0)  # the service's own part: tx + commit
        values["relay"] = r.get("relay", 0.0) - r.get("publish", 0.0)
        values["other"] = r["task_ms"] - r.get("claim", 0) - r.get("context", 0) - r.get("agent", 0) - r.get("apply", 0)
        for c in COLUMNS:
            by_key[step.key][c].append(values[c])
    print(f"\n{args.requirements} requirements one at a time (after a warm-up), 1 worker prefork -c {args.concurrency};"
          f" median per step key, ms (sql_n, subprocess_n: counts)")
    head = f"{'step':17}" + "".join(f"{HEADERS.get(c, c):>10}" for c in COLUMNS)
    print(head)
    totals = dict.fromkeys(COLUMNS, 0.0)
    for key in KEYS:
        med = {c: statistics.median(v) if v else float("nan") for c, v in by_key[key].items()}
        for c in COLUMNS:
            totals[c] += med[c]
        print(f"{key:17}" + "".join(f"{med[c]:10.1f}" for c in COLUMNS))
    print(f"{'sum of 8':17}" + "".join(f"{totals[c]:10.1f}" for c in COLUMNS))
    print(f"\nDB connections opened during the measured tasks: {connects}")
    print("hop = previous publish → task_prerun (Redis + Celery dispatch); apply = the service's transaction and "
          "commit;\nrelay = on-commit outbox relay (handlers, autonomous gate) less publish; publish = apply_async of "
          "the next step(s);\nother = rest of the task (Celery/Django per-task overhead, lease objects); "
          "sql/subprocess overlap the phases.")


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requirements", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=2)
    return parser.parse_args()


if __name__ == "__main__":
    main()
