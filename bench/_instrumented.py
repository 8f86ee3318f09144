"""The aiteam Celery app with timers around the phases of run_step, for bench/step_profile.py only.

Start a worker with `-A bench._instrumented` and BENCH_PROFILE_DIR set: each pool process appends one JSON
line per task to BENCH_PROFILE_DIR/<pid>.jsonl with wall-clock timestamps (time.time()) of the phases
(prerun, claim, context, agent, apply with its commit, the on-commit outbox relay, the publish of the next
step) and the SQL statements and subprocesses (git) it ran. The bench process calls install() too, so the
publish time of the first step is recorded as well. Nothing in the application is changed: the functions
are wrapped at import time, in this process only.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from aiteam.celery import app  # noqa: F401  (celery -A bench._instrumented finds it here)

_OUT = os.environ.get("BENCH_PROFILE_DIR")
_cur: dict = {}
_depth = {"relay": 0}
_installed = False


def _emit(record: dict) -> None:
    if _OUT:
        with open(Path(_OUT) / f"{os.getpid()}.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")


def _add(name: str, seconds: float) -> None:
    _cur[name] = _cur.get(name, 0.0) + seconds * 1000
    _cur[f"{name}_n"] = _cur.get(f"{name}_n", 0) + 1


def _sql_wrapper(execute, sql, params, many, context):
    started = time.perf_counter()
    try:
        return execute(sql, params, many, context)
    finally:
        _add("sql", time.perf_counter() - started)


def _timed(name: str, fn, *, mark: str | None = None):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _add(name, time.perf_counter() - started)
            if mark:
                _cur[mark] = time.time()
    wrapper.__wrapped__ = fn
    return wrapper


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from celery.signals import task_postrun, task_prerun
    from django.db.backends.signals import connection_created

    import lifecycle.runner as tasks
    from agents.schemas.constraints import with_constraints
    from lifecycle.services import dispatch, leases, outbox

    original_run = subprocess.run
    subprocess.run = _timed("subprocess", original_run)

    leases.step_claim = _timed("claim", leases.step_claim, mark="t_claimed")

    original_send = dispatch.send_step

    def send_step(step_id: int, key: str, countdown=None) -> None:
        started = time.perf_counter()
        original_send(step_id, key, countdown=countdown)
        _add("publish", time.perf_counter() - started)
        _emit({"published": step_id, "t": time.time()})

    dispatch.send_step = send_step

    original_relay = outbox.relay

    def relay(*args, **kwargs):
        _depth["relay"] += 1
        started = time.perf_counter()
        try:
            return original_relay(*args, **kwargs)
        finally:
            _depth["relay"] -= 1
            if _depth["relay"] == 0:
                _add("relay", time.perf_counter() - started)

    outbox.relay = relay

    def execute(self, lease, constraints=()):
        if self.run is not None:
            return _timed("run", self.run)(lease)
        context = _timed("context", lambda lease: with_constraints(self.context(lease), constraints))(lease)
        return _timed("agent", self.agent.run)(context, tasks._llm(lease))

    tasks.StepSpec.execute = execute
    tasks._apply = _timed("apply", tasks._apply, mark="t_applied")

    def on_connect(sender, connection, **kwargs):
        _add("connect", 0)
        if _sql_wrapper not in connection.execute_wrappers:
            connection.execute_wrappers.append(_sql_wrapper)

    connection_created.connect(on_connect, weak=False)

    @task_prerun.connect(weak=False)
    def prerun(task_id=None, task=None, args=None, **kwargs):
        from django.db import connection

        if _sql_wrapper not in connection.execute_wrappers:
            connection.execute_wrappers.append(_sql_wrapper)
        _cur.clear()
        _cur.update({"t_prerun": time.time(), "p_prerun": time.perf_counter(), "task": task.name,
                     "step_id": (args or [None])[0]})

    @task_postrun.connect(weak=False)
    def postrun(**kwargs):
        _cur["t_postrun"] = time.time()
        _cur["task_ms"] = (time.perf_counter() - _cur.pop("p_prerun")) * 1000
        _emit(dict(_cur))


if _OUT and os.environ.get("DJANGO_SETTINGS_MODULE"):
    import django

    django.setup()
    install()
