"""Run slots: each concurrent sandbox run gets a uid of its own, held with a file lock for the run.

RLIMIT_NPROC counts every process of a uid, so runs that shared one uid shared one process budget: a fork bomb
in one run made another fail at fork. A uid per slot bounds each run's processes alone. The uids own no files
and have no account; a slot's lock is released by the kernel when its holder exits, however it exits.
"""
from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FIRST_UID = 200_000  # above any account a distribution creates, below the 2^31 that some tools choke on
SLOTS = 32  # concurrent runs on one host; a sandbox worker runs one at a time per process


class NoFreeSlot(RuntimeError):
    """Every slot stayed taken for as long as the run was willing to wait."""


@contextmanager
def run_slot(root: Path, *, wait_s: float) -> Iterator[int]:
    """Hold a free slot (an exclusive flock on root/slots/N.lock) while the block runs; yields the slot's uid."""
    folder = root / "slots"
    folder.mkdir(mode=0o700, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        held = _take_one(folder)
        if held is not None:
            break
        if time.monotonic() > deadline:
            raise NoFreeSlot(f"all {SLOTS} sandbox slots stayed busy for {wait_s:.0f}s")
        time.sleep(0.05)
    fd, slot = held
    try:
        yield FIRST_UID + slot
    finally:
        os.close(fd)  # releases the lock


def _take_one(folder: Path) -> tuple[int, int] | None:
    for slot in range(SLOTS):
        fd = os.open(folder / f"{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return fd, slot
    return None
