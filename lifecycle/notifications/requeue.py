"""The beat's second chance for notification work whose message was lost: queue it again, spaced out.

Both kinds of lost work (an event's `notify_for_event`, a notification due to be sent) go through
`requeue_spaced`: a row queued again is not queued again before as long again as it has been lost (at least
AITEAM_NOTIFY_LOST_AFTER_S), so a row waiting behind a long queue gets a few copies, not one a minute; rows never
queued again come first, so a few that always fail cannot hold the others back; a row the broker did not take
goes again at the next beat. Two beats at once lock different rows (SKIP LOCKED).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q


def next_requeue(now: datetime, *, lost_since: datetime) -> datetime:
    """When the beat may queue something again that it queues now: after as long again as it has been lost."""
    return now + max(now - lost_since, timedelta(seconds=settings.AITEAM_NOTIFY_LOST_AFTER_S))


def requeue_spaced(lost: models.QuerySet, *, at: str, since: str, queue: Callable[[list[int]], list[int]],
                   now: datetime, limit: int, fields: Sequence[str] = ()) -> list[models.Model]:
    """Queue up to `limit` of the `lost` rows whose turn it is (`at`, the column holding the next turn, unset or
    past), each lost since its `since` column; `queue` takes their ids once this commits and returns those the
    broker refused. Returns the rows, with `at` set to their next turn and `fields` loaded."""
    model = lost.model
    with transaction.atomic():
        rows = list(lost.filter(Q(**{at: None}) | Q(**{f"{at}__lte": now})).select_for_update(skip_locked=True)
                    .order_by(F(at).asc(nulls_first=True), since).only("pk", since, *fields)[:limit])
        for row in rows:
            setattr(row, at, next_requeue(now, lost_since=getattr(row, since)))
        model.objects.bulk_update(rows, [at])
        ids = [row.pk for row in rows]

        def queue_and_retry_refused() -> None:
            refused = queue(ids)
            if refused:
                model.objects.filter(pk__in=refused).update(**{at: None})

        transaction.on_commit(queue_and_retry_refused)
    return rows
