"""Schedule a step: its row once, and its message (or this worker's inline slot) after commit."""
from __future__ import annotations

from django.db import IntegrityError, transaction

from lifecycle.models import Step
from lifecycle.services import dispatch
from lifecycle.services.inline import inline_candidate


def step_schedule(*, requirement_id, key: str, attempt: int) -> None:
    """Create the step row once and queue it after commit; scheduling it again is harmless (nothing happens).
    Inside a worker's inline slot, the first new step on the slot's queue, when nothing else waits on that queue,
    is created already claimed by this worker and run next without a broker hop."""
    slot = inline_candidate(key)
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction goes on when the row exists
            step = Step.objects.create(requirement_id=requirement_id, key=key, attempt=attempt,
                                       **(slot.claim_fields() if slot else {}))
    except IntegrityError:
        if not Step.objects.filter(requirement_id=requirement_id, key=key, attempt=attempt).exists():
            raise
        return  # (requirement, key, attempt) exists: that step is already on its way
    if slot:
        slot.reserve(step)
    else:
        # robust: a broker hiccup must not undo or fail the caller; the reaper re-sends lost steps
        transaction.on_commit(lambda: dispatch.send_step(step.pk, step.key), robust=True)
