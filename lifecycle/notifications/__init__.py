"""Notifications: channel adapters (one small module each), sending with retries, outbox subscribers.

A handler turns a domain event into Notification rows (idempotent: one per event, channel
and recipient) and queues their sending after commit. Sending claims a row, sends it
through its channel and records the outcome; a failing channel is retried with backoff
(Celery retry, and the beat for anything a lost message left behind) and never raises
into the pipeline that caused it.
"""
