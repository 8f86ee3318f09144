"""The floor under an aiteam step: the statements one machinery step sends, sent by psycopg alone.

bench/step_overhead.py compares aiteam's machinery with LangGraph. This script splits aiteam's side in two:
what a step costs the database (its round trips, the server's work, COMMIT's WAL flush) and what aiteam's
Python adds on top (Django's cursor and ORM, model instances, the FSM, preparing values, the inline slot).

Both run in this process, on one scratch PostgreSQL database, alternating requirement by requirement:
- aiteam: bench/_machinery.py's 8 steps, each through the body of the real `run_step` task (budget check,
  reading the ~2 KB input, the apply transaction, inline continuation into the next step; no Celery worker,
  so no broker hop), Redis database 12 answering the inline slot's "is the queue idle";
- floor: the same statements with the same values, built by aiteam's own SQL builders (the budget snapshot,
  the ORM's SQL for the load, the apply lock, the snapshot rows and their check, write-behind's UPDATE and
  INSERT), sent through one psycopg connection with the same prepare threshold, and in the same round trips:
  each step's budget snapshot and rows, its input among them, are read with the COMMIT that claimed it (the
  first step's with step_claim's, the others' with the previous step's), and it is applied on those rows
  (steps.lock_at_commit): one pipeline with BEGIN and the rows' check, the requirement update, audit row,
  outbox event, step done, next step, COMMIT, and the next step's budget snapshot and rows. (A step without
  a snapshot checks its budget and loads its input by query, then sends BEGIN and the lock in one pipeline.)

Prints per-step medians of both, the difference (aiteam's Python above the floor, plus the inline slot's
"is the queue idle" question to Redis every 20 ms, ~0.2 ms a step), and the floor by phase.

    .venv/bin/python bench/step_floor.py [--requirements 60]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._report import BENCH_BROKER, print_load_after, print_machine, summary  # noqa: E402
from bench._services import scratch_database  # noqa: E402

PHASES = ("budget", "load", "begin + lock", "writes + COMMIT + reads")
WORKER = "step_floor"


def main() -> None:
    args = parse()
    with scratch_database("aiteam_bench_step_floor", BENCH_BROKER) as url:
        os.environ.update({"DATABASE_URL": url, "CELERY_BROKER_URL": BENCH_BROKER, "AITEAM_LOG_LEVEL": "WARNING",
                           "DJANGO_SETTINGS_MODULE": "aiteam.settings", "AITEAM_STEP_INLINE_WINDOW_S": "5"})
        import django

        django.setup()
        import psycopg
        import redis
        from django.conf import settings

        print_machine("Django", "psycopg", "django-fsm-2", database_url=url, broker_url=BENCH_BROKER)
        broker = redis.Redis.from_url(BENCH_BROKER)
        threshold = settings.DATABASES["default"]["OPTIONS"].get("prepare_threshold")
        # autocommit, as Django's connection is between transactions: the reads before the lock run outside the
        # step's transaction, and BEGIN goes just before the lock, as the apply's transaction.atomic() sends it
        raw = psycopg.connect(url, prepare_threshold=threshold, autocommit=True)
        bench = Bench(broker, raw)
        for _ in range(3):  # warm-up: caches, prepared statements on both connections
            bench.aiteam_run(), bench.floor_run()
        aiteam, floor, phases = [], [], {name: [] for name in PHASES}
        for _ in range(args.requirements):
            aiteam += bench.aiteam_run()
            for step in bench.floor_run():
                floor.append(sum(step))
                for name, value in zip(PHASES, step, strict=True):
                    phases[name].append(value)
        raw.close()
    report(args, aiteam, floor, phases, threshold)


class Bench:
    def __init__(self, broker, raw) -> None:
        from bench import _machinery
        from lifecycle.models import Organization, Project

        self.machinery, self.broker, self.raw = _machinery, broker, raw
        org = Organization.objects.create(slug="floor", name="floor")
        self.project = Project.objects.create(organization=org, slug="default", name="floor")
        self.statements = Statements()

    def new(self):
        """A requirement with its first step claimed by this process (not timed); returns its lease."""
        from agents import tasks
        from lifecycle.models import Requirement, Step
        from lifecycle.services import steps

        requirement = Requirement.objects.create(organization=self.project.organization, project=self.project,
                                                 title="floor", brief="x" * 2048)
        self.machinery.start(requirement)
        self.broker.flushdb()  # start() queued the first step's message: the queue must read as idle
        step_id = Step.objects.values_list("pk", flat=True).get(requirement=requirement, key=self.machinery.KEYS[0])
        return steps.step_claim(step_id=step_id, worker=WORKER, rows_for=tasks._applies_at_commit)

    def aiteam_run(self) -> list[float]:
        """One requirement's 8 steps through run_step's per-step body, inline; ms per step."""
        from agents import tasks

        task = SimpleNamespace(request=SimpleNamespace(retries=0, is_eager=False), max_retries=0)
        lease, times = self.new(), []
        first = lease.step_id
        while lease is not None:
            began = time.perf_counter()
            lease = tasks._run_one(task, lease, worker=WORKER, inline=True, delivered=lease.step_id == first)
            times.append((time.perf_counter() - began) * 1000)
        assert len(times) == len(self.machinery.KEYS), f"{len(times)} steps ran inline, not 8"
        return times

    def floor_run(self) -> list[tuple[float, ...]]:
        """The same requirement's 8 steps as bare statements; per step, ms per phase."""
        lease = self.new()
        requirement_id, step_id = lease.requirement_id, lease.step_id
        rows = lease.rows.row if lease.rows is not None else None  # read with the claim's COMMIT
        out = []
        for index, key in enumerate(self.machinery.KEYS):
            following = self.machinery.NEXT.get(key)
            phases, step_id, rows = self.statements.step(self.raw, requirement_id, step_id, key, following, rows)
            out.append(phases)
            assert following is None or step_id is not None, f"step {index + 2} was not inserted"
        return out


class Statements:
    """A machinery step's statements, from the builders aiteam's own code uses, and their values."""

    def __init__(self) -> None:
        from django.db import connection, transaction

        from aiteam.db import by_pk
        from aiteam.db import write_behind as wb
        from bench._machinery import ACTOR
        from lifecycle.models import OutboxEvent, Requirement, StateTransition, Step
        from lifecycle.services import budgets, steps
        from lifecycle.services.transitions import _guard_names

        self.budget_sql, self.budget_template = budgets._snapshot_sql("bench")
        self.slots = {budgets._KEY: "key", budgets._ATTEMPT: "attempt", budgets._REQUIREMENT: "requirement"}
        self.load_sql = by_pk._compiled(Requirement, ("brief",), "default", connection.vendor)[0]
        with transaction.atomic():  # the ORM compiles FOR UPDATE only inside a transaction
            self.lock_sql = steps._lock_query(steps._REQUIREMENT_FIRST)
        self.snapshot_sql = f"SELECT * FROM ({steps._rows_query()}) step_rows CROSS JOIN ({self.budget_sql}) budget"
        self.rows_width = len(steps._attnames(Step)) + len(steps._attnames(Requirement)) + 2
        self.unchanged_sql = steps._unchanged_sql()
        self.brief_at = len(steps._attnames(Step)) + steps._attnames(Requirement).index("brief")
        # the columns a self-loop transition writes: its state and when it was entered (write_behind.save writes
        # only what changed since the row was read, aiteam.db.loaded)
        self.requirement_fields = ("state", "state_changed_at")
        self.requirement_sql = wb._update_sql(Requirement, self.requirement_fields)
        self.audit_sql, self.audit_fields = wb._insert_sql(StateTransition, False), wb._insert_fields(StateTransition)
        self.event_sql, self.event_fields = wb._insert_sql(OutboxEvent, False), wb._insert_fields(OutboxEvent)
        self.done_sql = wb._update_sql(Step, ("state", "error", "finished_at", "lease_expires_at"))
        self.next_sql, self.next_fields = wb._insert_sql(Step, True), wb._insert_fields(Step)
        self.actor, self.guard = ACTOR, _guard_names(Requirement.retry_development, "in_development")

    def budget_params(self, requirement_id, key: str) -> list:
        slots = {"key": key, "attempt": 1, "requirement": requirement_id}
        return [slots[self.slots[p]] if p in self.slots else p for p in self.budget_template]

    def step(self, conn, requirement_id, step_id: int, key: str, following: str | None, rows: tuple | None):
        """One step; rows: the step's snapshot (its xmin and its requirement's) read with the COMMIT that
        claimed it (None: none was read, so it is locked first). Returns the phases' ms, the next step's id and
        its snapshot."""
        from django.utils import timezone
        from psycopg.types.json import Jsonb

        marks = [time.perf_counter()]
        if rows is None:  # else the budget snapshot came with the rows, with the COMMIT that claimed the step
            conn.execute(self.budget_sql, self.budget_params(requirement_id, key)).fetchone()
        marks.append(time.perf_counter())
        if rows is None:
            brief = conn.execute(self.load_sql, [requirement_id]).fetchone()[0]
        else:  # came with the COMMIT that claimed the step
            brief = rows[self.brief_at]
        output = brief[1:] + brief[:1]
        marks.append(time.perf_counter())
        if rows is None:
            with conn.pipeline():
                conn.execute("BEGIN", prepare=False)
                lock = conn.execute(self.lock_sql, [step_id])
            lock.fetchone()
        marks.append(time.perf_counter())
        now = timezone.now()
        audit = {"requirement_id": requirement_id, "subject": "requirement", "subject_id": str(requirement_id),
                 "event": "retry_development", "from_state": "in_development", "to_state": "in_development",
                 "actor_role": self.actor.role, "actor_user_id": None, "via": self.actor.via, "guard": self.guard,
                 "metadata": Jsonb({"step": key}), "created_at": now}
        event = {"requirement_id": requirement_id, "name": "BenchStepDone",
                 "payload": Jsonb({"step": key, "state": output}), "created_at": now, "sent_at": now,
                 "relay_attempts": 0, "last_error": ""}
        nxt = {"requirement_id": requirement_id, "key": following, "attempt": 1, "state": "running", "fence": 1,
               "runs": 1, "worker": WORKER, "lease_expires_at": now + timedelta(seconds=900), "enqueued_at": now,
               "started_at": now, "finished_at": None, "error": ""}
        with conn.pipeline():
            if rows is not None:
                conn.execute("BEGIN", prepare=False)
                conn.execute(self.unchanged_sql, [step_id, rows[-2], rows[-1]])
            conn.execute(self.requirement_sql, ["in_development", now, requirement_id])
            conn.execute(self.audit_sql, _values(audit, self.audit_fields))
            conn.execute(self.event_sql, _values(event, self.event_fields))
            conn.execute(self.done_sql, ["done", "", now, None, step_id])
            inserted = conn.execute(self.next_sql, _values(nxt, self.next_fields)) if following else None
            conn.execute("COMMIT", prepare=False)
            if following:  # the next step's rows and budget snapshot, one read (steps.InlineSlot.reserve)
                snapshot = conn.execute(self.snapshot_sql, [requirement_id, following, 1,
                                                            *self.budget_params(requirement_id, following)])
        if following:
            rows = snapshot.fetchone()[:self.rows_width]
        row = inserted.fetchone() if inserted else None
        marks.append(time.perf_counter())
        return tuple((b - a) * 1000 for a, b in zip(marks, marks[1:], strict=False)), row[0] if row else None, rows


def report(args, aiteam: list[float], floor: list[float], phases: dict, threshold) -> None:
    a, f = statistics.median(aiteam), statistics.median(floor)
    print(f"\n{args.requirements} requirements × 8 steps each way, alternating; one process, no Celery "
          f"(prepare threshold {threshold})")
    print(f"aiteam step (run_step's body, inline), ms:   {summary(aiteam)}")
    print(f"floor (the same statements, psycopg), ms:    {summary(floor)}")
    print(f"aiteam's Python above the floor: {a - f:.2f} ms a step ({(a - f) / a:.0%} of the step); "
          f"aiteam / floor {a / f:.2f}×")
    print("floor by phase, median ms: " + ", ".join(f"{name} {statistics.median(values):.3f}"
                                                      for name, values in phases.items()))
    print_load_after()


def _values(row: dict, fields) -> list:
    """An INSERT's parameters: the row's values, and each column it does not name at the model's default (as
    write-behind sends them)."""
    return [row[f.attname] if f.attname in row else f.get_default() for f in fields]


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requirements", type=int, default=60)
    return parser.parse_args()


if __name__ == "__main__":
    main()
