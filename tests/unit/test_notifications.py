"""Notifications: e-mail (locmem) and a Slack-compatible webhook (a real HTTP server on 127.0.0.1),
sent once per event, retried with backoff when a channel fails, never in the pipeline's way."""
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from lifecycle.models import Notification, OutboxEvent
from lifecycle.notifications import delivery
from lifecycle.services import outbox
from lifecycle.tasks import deliver_notification
from tests.flows import pending, submit
from tests.review_tasks import open_review

pytestmark = pytest.mark.django_db(transaction=True)


class Hook:
    """A local incoming-webhook endpoint: records each JSON body and answers with the next queued status."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.statuses: list[int] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(hook.statuses.pop(0) if hook.statuses else 200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/services/T000/B000/secret-token"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()


@pytest.fixture
def hook(settings):
    endpoint = Hook()
    settings.AITEAM_NOTIFY_WEBHOOK_URL = endpoint.url
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()


@pytest.fixture
def rita_with_mail(rita):
    rita.email = "rita@acme.test"
    rita.save()
    return rita


def test_a_new_review_task_is_mailed_to_reviewers_and_posted_to_the_webhook(alice, rita_with_mail, hook):
    req = submit(alice)
    task = pending(req, "stories_approval")
    assert [(m.to, m.subject) for m in mail.outbox] == [
        (["rita@acme.test"], "New review task: Stories Approval for Reading list")]
    body = mail.outbox[0].body
    assert task.question in body and f"/admin/lifecycle/reviewtask/{task.pk}/change/" in body
    assert len(hook.bodies) == 1 and hook.bodies[0]["text"].startswith("*New review task: Stories Approval")
    assert set(Notification.objects.values_list("state", "channel")) == {("sent", "email"), ("sent", "webhook")}


def test_a_blocked_requirement_is_announced_as_such(acme_project, rita_with_mail):
    open_review(acme_project, kind="clarification", title="Vague idea")
    assert [m.subject for m in mail.outbox] == ["Requirement blocked: Vague idea needs answers"]


def test_a_project_webhook_overrides_the_default_and_model_output_cannot_ping_the_channel(acme_project, rita, hook,
                                                                                           settings):
    settings.AITEAM_NOTIFY_WEBHOOK_URL = ""
    acme_project.settings = {"notifications": {"webhook_url": hook.url}}
    acme_project.save()
    open_review(acme_project, title="<!channel> <http://evil|click> & more")
    text = hook.bodies[0]["text"]
    assert "<!channel>" not in text and "&lt;!channel&gt; &lt;http://evil|click&gt; &amp; more" in text


def test_relaying_the_same_event_again_sends_nothing_more(acme_project, rita_with_mail):
    open_review(acme_project)
    event = OutboxEvent.objects.get(name="ReviewTaskOpened")
    OutboxEvent.objects.filter(pk=event.pk).update(sent_at=None)
    outbox.relay(ids=[event.pk])
    assert len(mail.outbox) == 1 and Notification.objects.count() == 1


def test_a_failing_webhook_is_retried_with_backoff_and_the_pipeline_goes_on(alice, rita, hook):
    hook.statuses = [500]
    req = submit(alice)
    assert req.state == "user_stories_created" and pending(req, "stories_approval")  # not held up
    note = Notification.objects.get(channel="webhook")
    assert (note.state, note.attempts, note.last_error) == ("pending", 1, "ChannelError: webhook answered HTTP 500")
    assert hook.url not in note.last_error and "secret-token" not in note.recipient
    assert note.next_attempt_at > timezone.now() + timedelta(seconds=25)

    assert delivery.notifications_requeue_due() == 0  # not due yet: the beat leaves it alone
    assert delivery.notifications_requeue_due(now=note.next_attempt_at) == 1  # due: queued again
    later = note.next_attempt_at + timedelta(seconds=1)
    assert delivery.notification_deliver(note.pk, now=later) is None  # delivered this time
    note.refresh_from_db()
    assert (note.state, note.attempts, note.last_error) == ("sent", 2, "")
    assert len(hook.bodies) == 2


def test_backoff_doubles_and_the_row_fails_after_the_last_attempt(acme_project, rita, hook, settings):
    settings.AITEAM_NOTIFY_MAX_ATTEMPTS = 3
    hook.statuses = [503] * 3
    open_review(acme_project)
    note = Notification.objects.get(channel="webhook")
    waits = [note.next_attempt_at]
    for _ in range(2):
        note.refresh_from_db()
        delivery.notification_deliver(note.pk, now=note.next_attempt_at)
        note.refresh_from_db()
        waits.append(note.next_attempt_at)
    assert (note.state, note.attempts) == ("failed", 3)
    assert round((waits[1] - waits[0]).total_seconds()) == 60  # 30 s after the first failure, 60 s after the second


def test_the_worker_task_retries_through_celery_with_the_backoff(acme_project, rita, hook, monkeypatch):
    hook.statuses = [500, 500]
    open_review(acme_project)
    note = Notification.objects.get(channel="webhook")
    Notification.objects.filter(pk=note.pk).update(next_attempt_at=timezone.now())
    retried = {}

    class Retry(Exception):
        pass

    def retry(countdown):
        retried["countdown"] = countdown
        return Retry()

    monkeypatch.setattr(deliver_notification, "retry", retry)
    with pytest.raises(Retry):
        deliver_notification(note.pk)  # called as a worker would, not eagerly
    assert retried["countdown"] == 60.0


def test_a_broken_notifier_never_blocks_the_pipeline(alice, rita, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("template exploded")

    monkeypatch.setattr("lifecycle.notifications.handlers.notify", broken)
    req = submit(alice)
    assert pending(req, "stories_approval").is_pending
    assert not OutboxEvent.objects.filter(sent_at=None).exists()


def test_users_without_an_address_and_disabled_channels_get_nothing(acme_project, rita, settings):
    settings.AITEAM_NOTIFY_CHANNELS = ["email"]
    open_review(acme_project)
    assert mail.outbox == [] and not Notification.objects.exists()
