"""The lease heartbeat (lifecycle.services.leases.heartbeat) is one thread per process however many steps run, and it
lets go of a step past its hard time limit. On real workers: tests/integration/test_threads_pool.py."""
from __future__ import annotations

import dataclasses
import threading

from django.conf import settings
from django.test import override_settings

from lifecycle.services import leases


def _lease(step_id: int) -> leases.Lease:
    return leases.Lease(step_id, 1, None, "po_clarify", 1)


def _heartbeat_threads() -> int:
    return sum(thread.name == "lease heartbeat" for thread in threading.enumerate())


def test_thirty_two_steps_at_once_share_one_heartbeat_thread():
    inside, leave = threading.Barrier(33), threading.Event()
    counted: list[int] = []

    def step(lease: leases.Lease) -> None:
        with leases.heartbeat(lease):
            inside.wait()
            leave.wait()

    steps = [threading.Thread(target=step, args=(_lease(i),)) for i in range(32)]
    for thread in steps:
        thread.start()
    inside.wait()
    counted.append(_heartbeat_threads())
    leave.set()
    for thread in steps:
        thread.join()
    assert counted == [1]
    assert leases._BEATS._due() == []  # every step that ended was let go


def test_a_step_past_its_hard_time_limit_is_no_longer_renewed(caplog):
    expired = dataclasses.replace(settings.STEP_TIMEOUTS, hard_time_limit=0)
    with override_settings(STEP_TIMEOUTS=expired), leases.heartbeat(_lease(7)):
        assert leases._BEATS._due() == []
        assert "step 7 ran past its hard time limit" in caplog.text
    with leases.heartbeat(_lease(8)):
        assert leases._BEATS._due() == [_lease(8)]
