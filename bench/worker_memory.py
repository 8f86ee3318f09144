"""Worker memory over many requirements, and the largest rows the run left in PostgreSQL.

Runs N requirements (default 1,000) through one Celery worker (prefork -c 2, queues llm,default only) on a
scratch database `aiteam_bench_worker_memory` and Redis database 12, replay at 0 ms:

  --prefix 8 (default): AITEAM_AUTONOMOUS=true, the 8 steps po_clarify … engineer:T3; each requirement then
                        waits at self_test, which is on the `sandbox` queue that no worker consumes;
  --prefix 2:           AITEAM_AUTONOMOUS=false, po_clarify and ba_stories; each requirement then waits for
                        a human at the stories approval (faster: ~2 steps instead of 8).

All N are submitted at once (from this process, while the worker runs). Prints the VmRSS of the worker's
main process and of each pool process (from /proc/<pid>/status): idle after start, after one warm-up
requirement, at each quarter of the run and at the end. Then the largest row (pg_column_size(t.*)) of each
lifecycle table: the state rows (requirement, step, review task, outbox event, state transition, artifact)
against the target "no state row over 256 KB; large payloads stored out of line by hash", and apart from them
the payload rows (artifact blob, LLM call) and the other lifecycle tables. Row sizes depend on what the
agents produced (the sample cassette here), not on how many requirements ran.

    .venv/bin/python bench/worker_memory.py [--requirements 1000] [--prefix 8|2] [--concurrency 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._report import BENCH_BROKER, print_load_after, print_machine, rss_kb  # noqa: E402
from bench._services import pool_children, scratch_database, start_worker, stop  # noqa: E402

LIMIT = 256 * 1024
STATE_TABLES = {  # table → a column (SQL) that says which row it is
    "lifecycle_requirement": "t.title", "lifecycle_step": "t.key", "lifecycle_reviewtask": "t.kind",
    "lifecycle_outboxevent": "t.name", "lifecycle_statetransition": "t.event",
    "lifecycle_artifact": "t.kind || ':' || t.name",
}
PAYLOAD_TABLES = {"lifecycle_artifactblob": "t.size || ' bytes raw'", "lifecycle_llmcall": "t.role"}
LAST = {8: "engineer:T3", 2: "ba_stories"}


def main() -> None:
    args = parse()
    began = time.monotonic()
    os.environ.pop("ANTHROPIC_API_KEY", None)
    with tempfile.TemporaryDirectory() as tmp, scratch_database("aiteam_bench_worker_memory", BENCH_BROKER) as url:
        env = {"DATABASE_URL": url, "CELERY_BROKER_URL": BENCH_BROKER,
               "AITEAM_AUTONOMOUS": "true" if args.prefix == 8 else "false",
               "AITEAM_LLM_PROVIDER": "replay", "AITEAM_REPLAY_LATENCY_MS": "0",
               "AITEAM_WORKSPACE_ROOT": f"{tmp}/ws", "AITEAM_REMOTES_ROOT": f"{tmp}/remotes",
               "AITEAM_LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "aiteam.settings"}
        os.environ.update(env)
        import django

        django.setup()
        import redis

        print_machine("Django", "celery", "kombu", "psycopg", database_url=url, broker_url=BENCH_BROKER)
        redis.Redis.from_url(BENCH_BROKER).flushdb()
        log = Path(tmp) / "worker.log"
        worker = start_worker("memory", env, args.concurrency, log, queues="llm,default", wait_ready=30)
        try:
            run(args, worker.pid)
        except BaseException:
            print("--- worker log (tail) ---\n" + log.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            stop(worker)
            redis.Redis.from_url(BENCH_BROKER).flushdb()  # the queued self_test messages
        rows(url)
        from django.db import connections

        connections.close_all()
    print(f"\nbenchmark wall time: {time.monotonic() - began:.1f} s")
    print_load_after()


def rss_line(label: str, pid: int) -> str:
    pool = pool_children(pid)
    sizes = [rss_kb(p) for p in pool]
    return (f"  {label:30} main {rss_kb(pid) / 1024:7.1f} MB   pool " + ", ".join(f"{s / 1024:7.1f} MB" for s in sizes)
            + f"   (pool pids {pool})")


def run(args, pid: int) -> None:
    from django.contrib.auth import get_user_model

    from lifecycle.models import Membership, Organization, Project, Step
    from lifecycle.services.intake import requirement_submit
    from tests.flows import SAMPLE

    org = Organization.objects.create(slug="bench", name="bench")
    Project.objects.create(organization=org, slug="default", name="bench")
    user = get_user_model().objects.create(username="bench")
    Membership.objects.create(user=user, organization=org, role="admin")
    last = LAST[args.prefix]
    time.sleep(1.0)
    print(f"\n{args.requirements} requirements, {args.prefix} steps each (up to {last}; autonomous "
          f"{'on' if args.prefix == 8 else 'off'}), 1 worker prefork -c {args.concurrency}, queues llm,default, replay 0 ms")
    print("worker RSS (VmRSS):")
    print(rss_line("idle after start", pid))

    def done_count() -> int:
        return Step.objects.filter(key=last, state="done").count()

    def check_failures() -> None:
        failed = list(Step.objects.filter(state="failed").values_list("key", "error")[:3])
        if failed:
            sys.exit(f"steps failed: {failed}")

    requirement_submit(user=user, brief=SAMPLE, title="warm-up")
    deadline = time.monotonic() + 60
    while done_count() < 1:
        check_failures()
        if time.monotonic() > deadline:
            sys.exit("the warm-up requirement did not finish in 60 s")
        time.sleep(0.05)
    print(rss_line("after 1 warm-up requirement", pid))

    started = time.monotonic()
    for i in range(args.requirements):
        requirement_submit(user=user, brief=SAMPLE, title=f"memory {i}")
    submitted = time.monotonic() - started
    target = args.requirements + 1
    marks = [target - args.requirements + args.requirements * q // 4 for q in (1, 2, 3)]
    deadline = started + args.timeout
    while (n := done_count()) < target:
        check_failures()
        if time.monotonic() > deadline:
            sys.exit(f"timed out after {args.timeout} s with {n - 1} of {args.requirements} done")
        while marks and n >= marks[0]:
            print(rss_line(f"{marks.pop(0) - 1} done ({time.monotonic() - started:5.1f} s)", pid))
        time.sleep(0.25)
    wall = time.monotonic() - started
    print(rss_line(f"all {args.requirements} done ({wall:5.1f} s)", pid))
    steps = Step.objects.filter(state="done").count() - args.prefix
    print(f"{steps} steps in {wall:.1f} s = {steps / wall:.1f} steps/s (submitting all took {submitted:.1f} s of it)")


def rows(url: str) -> None:
    import psycopg

    with psycopg.connect(url) as conn:
        others = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'lifecycle_%' "
            "ORDER BY tablename").fetchall() if r[0] not in STATE_TABLES and r[0] not in PAYLOAD_TABLES]

        def table(title: str, tables: dict[str, str], judged: bool) -> None:
            print(f"\n{title}")
            print(f"  {'table':30} {'rows':>8} {'largest row':>12} {'mean row':>10} {'> 256 KB':>9}  largest is")
            worst = 0
            for name, label in tables.items():
                count, mean, over = conn.execute(
                    f"SELECT count(*), coalesce(avg(pg_column_size(t.*)), 0), "
                    f"count(*) FILTER (WHERE pg_column_size(t.*) > {LIMIT}) FROM {name} t").fetchone()
                top = conn.execute(f"SELECT pg_column_size(t.*), {label} FROM {name} t "
                                   f"ORDER BY pg_column_size(t.*) DESC LIMIT 1").fetchone() or (0, "")
                worst = max(worst, top[0])
                print(f"  {name:30} {count:8d} {fmt_bytes(top[0]):>12} {fmt_bytes(mean):>10} {over:9d}  {top[1]}")
            if judged:
                verdict = "met" if worst <= LIMIT else "NOT met"
                print(f"  target no state row over 256 KB: {verdict} (largest {fmt_bytes(worst)})")

        table("largest state rows (pg_column_size(t.*): on-page size, after compression; TOASTed values inlined):",
              STATE_TABLES, True)
        table("payload rows (stored out of line by hash: artifact blobs; LLM calls: the audit/replay record):",
              PAYLOAD_TABLES, False)
        table("other lifecycle tables:", dict.fromkeys(others, "''"), False)
        artifact_inline = conn.execute(
            "SELECT count(*) FROM lifecycle_artifact a JOIN lifecycle_artifactblob b ON b.sha256 = a.blob_id").fetchone()[0]
        distinct = conn.execute("SELECT count(*) FROM lifecycle_artifactblob").fetchone()[0]
        print(f"\nartifacts referencing a blob by hash: {artifact_inline}; distinct blobs: {distinct} "
              f"(equal content shared)")


def fmt_bytes(n: float) -> str:
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n:.0f} B"


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requirements", type=int, default=1000)
    parser.add_argument("--prefix", type=int, choices=(8, 2), default=8, help="steps per requirement")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600, help="seconds the whole run may take")
    return parser.parse_args()


if __name__ == "__main__":
    main()
