"""Benchmark: the SLA sweep and the review inbox with 100,000 review tasks (1 % overdue) in PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/aiteam_bench .venv/bin/python bench/review_inbox.py

Creates the database named in DATABASE_URL (dropping it first if it exists), migrates it, and
inserts 1,000 requirements with 100 review tasks each: 1 % of the tasks are pending and past
their SLA, 9 % pending within it, 90 % decided long ago. It then times

  * the sweep's due query (EXPLAIN ANALYZE: which index, how long),
  * one sweep over the 1,000 overdue tasks: each reminded in its own transaction with its audit
    row and outbox event, then relayed; the notification work it queues (recipients, messages,
    e-mails through the locmem backend) is timed apart afterwards as the workers' share,
  * an idle sweep (nothing due: the steady state every minute),
  * the inbox page (the admin changelist a reviewer lands on) and the staff dashboard,

and repeats the page timings with every task pending (the worst case for the inbox counts).
The database is dropped at the end unless --keep is given. Celery runs eagerly (no broker).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import bench  # noqa: E402, F401, I001  (a benchmark's own secret key)
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/aiteam_bench"
REQUIREMENTS, TASKS_PER_REQUIREMENT = 1_000, 100


def main() -> None:
    args = _args()
    url = os.environ.get("DATABASE_URL") or DEFAULT_URL
    if not url.startswith("postgres"):
        sys.exit(f"DATABASE_URL must be a postgres:// URL (got {url!r})")
    _recreate_database(url)
    _configure(url)
    try:
        _run(args)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            _drop_database(url)


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    parser.add_argument("--renders", type=int, default=5, help="page renders to take the median of")
    return parser.parse_args()


def _configure(url: str) -> None:
    os.environ.update({"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "aiteam.settings", "AITEAM_AUTONOMOUS": "false",
                       "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend", "AITEAM_LOG_LEVEL": "WARNING",
                       "AITEAM_NOTIFY_CHANNELS": "email"})
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _run(args: argparse.Namespace) -> None:
    from django.utils import timezone

    from lifecycle.models import ReviewTask
    from lifecycle.services.sla import review_sweep

    reviewer = _populate()
    total = ReviewTask.objects.count()
    now = timezone.now()
    due = ReviewTask.objects.due_for_sweep(now).count()
    print(f"{total:,} review tasks: {ReviewTask.objects.pending().count():,} pending, {due:,} overdue (due for the sweep)")

    query = ReviewTask.objects.due_for_sweep(now).order_by("next_sweep_at").values_list("pk", flat=True)[:1000]
    plan = query.explain(analyze=True)
    index = "review_sweep_due" if "review_sweep_due" in plan else "NOT the partial index"
    print(f"due query: {_execution_ms(plan):.2f} ms, {index}")

    events, sends = _defer_to_workers()
    started = time.perf_counter()
    done = review_sweep(now=now)
    sweep_s = time.perf_counter() - started
    print(f"one sweep: {dict(done)} in {sweep_s:.2f} s ({1000 * sweep_s / max(sum(done.values()), 1):.2f} ms a task: "
          f"lock, transition + audit row, outbox event, commit, relay; {len(events):,} notification jobs queued)")
    started = time.perf_counter()
    idle = review_sweep(now=now)
    print(f"idle sweep (nothing due): {dict(idle)} in {1000 * (time.perf_counter() - started):.2f} ms")
    _workers_share(events, sends)

    _pages(reviewer, args.renders, "10 % pending")
    ReviewTask.objects.update(state="open", decision="")
    _pages(reviewer, args.renders, "100 % pending")


def _populate():
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from lifecycle.models import Membership, Organization, Project, Requirement, ReviewTask
    from lifecycle.services.sla_policies import policy_for

    started = time.perf_counter()
    org = Organization.objects.create(slug="bench", name="Bench")
    project = Project.objects.create(organization=org, slug="default", name="Default")
    reviewer = get_user_model().objects.create(username="rita", email="rita@bench.test", is_staff=True)
    Membership.objects.create(user=reviewer, organization=org, role="reviewer")
    requirements = Requirement.objects.bulk_create(
        Requirement(organization=org, project=project, brief=f"brief {i}", title=f"Requirement {i}",
                    state="user_stories_created", story_round=1) for i in range(REQUIREMENTS))
    now, fields = timezone.now(), policy_for("stories_approval").fields_for_new_task(timezone.now())
    rows = (_task(org, req, n, now, fields) for req in requirements for n in range(1, TASKS_PER_REQUIREMENT + 1))
    batch: list[ReviewTask] = []
    for row in rows:
        batch.append(row)
        if len(batch) == 10_000:
            ReviewTask.objects.bulk_create(batch)
            batch = []
    ReviewTask.objects.bulk_create(batch)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE lifecycle_reviewtask")  # fresh statistics, as autovacuum would soon have
    print(f"populated in {time.perf_counter() - started:.1f} s")
    return reviewer


def _task(org, req, n: int, now, fields: dict):
    """Task n of 100: n == 100 is overdue (1 %), 91..99 pending within the SLA (9 %), the rest decided."""
    from lifecycle.models import ReviewTask

    values = dict(fields)
    if n == 100:
        values.update(sla_deadline=now - timedelta(hours=2), next_sweep_at=now - timedelta(hours=2))
    elif n <= 90:
        values.update(state="resolved", decision="approve", next_sweep_at=None)
    return ReviewTask(organization=org, requirement=req, kind="stories_approval", round=n,
                      question=f"Approve round {n}?", options=["approve", "reject", "request_changes"], **values)


def _defer_to_workers() -> tuple[list[int], list[int]]:
    """In production the sweeper's process only relays events and queues work for the workers; Celery is eager
    here, so the queues are lists that the benchmark drains afterwards to time the workers' share on its own."""
    from lifecycle.notifications import handlers, sending

    events: list[int] = []
    sends: list[int] = []
    handlers._queue = events.append
    sending.enqueue = sends.extend
    return events, sends


def _workers_share(events: list[int], sends: list[int]) -> None:
    from lifecycle.notifications.handlers import notify_for_event
    from lifecycle.notifications.sending import notification_send

    started = time.perf_counter()
    for event_id in events:
        notify_for_event(event_id)
    notified = time.perf_counter() - started
    started = time.perf_counter()
    for pk in sends:
        notification_send(pk)
    sent = time.perf_counter() - started
    print(f"workers' share, in one process: recipients + messages for {len(events):,} events {notified:.2f} s "
          f"({1000 * notified / max(len(events), 1):.2f} ms each), {len(sends):,} e-mails sent {sent:.2f} s "
          f"({1000 * sent / max(len(sends), 1):.2f} ms each)")


def _pages(reviewer, renders: int, label: str) -> None:
    from django.db import connection
    from django.test import Client

    client = Client()
    client.force_login(reviewer)
    for name, url in (("inbox page", "/admin/lifecycle/reviewtask/"), ("dashboard", "/staff/dashboard/")):
        assert client.get(url).status_code == 200  # warm-up: templates, connections
        times = []
        for _ in range(renders):
            with _queries(connection) as counted:
                started = time.perf_counter()
                response = client.get(url)
                times.append(1000 * (time.perf_counter() - started))
            assert response.status_code == 200
        print(f"{name} ({label}): median {statistics.median(times):.1f} ms over {renders} renders, "
              f"{len(counted)} queries")


def _queries(connection):
    from django.test.utils import CaptureQueriesContext

    return CaptureQueriesContext(connection)


def _execution_ms(plan: str) -> float:
    line = next((line for line in plan.splitlines() if line.startswith("Execution Time")), "Execution Time: 0 ms")
    return float(line.split(":")[1].split()[0])


def _admin_connection(url: str):
    import psycopg

    parts = urlparse(url)
    return psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username or "postgres",
                           password=parts.password, dbname="postgres", autocommit=True)


def _recreate_database(url: str) -> None:
    name = urlparse(url).path.lstrip("/")
    with _admin_connection(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def _drop_database(url: str) -> None:
    with _admin_connection(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{urlparse(url).path.lstrip("/")}" WITH (FORCE)')


if __name__ == "__main__":
    main()
