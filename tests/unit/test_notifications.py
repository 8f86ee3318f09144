"""Notifications: e-mail (locmem) and a Slack-compatible webhook (a real HTTP server on 127.0.0.1),
sent once per event, retried with backoff when a channel fails, never in the pipeline's way."""
import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core import mail
from django.utils import timezone

from lifecycle.admin import ProjectForm
from lifecycle.models import Notification, OutboxEvent, ReviewTask
from lifecycle.notifications import recipients, sending, webhook
from lifecycle.notifications.channels import CHANNELS
from lifecycle.services import outbox
from lifecycle.services.sla import review_sweep
from lifecycle.tasks import send_notification
from tests.factories import MembershipFactory, project_form_data
from tests.fakes.webhook_server import WebhookServer
from tests.flows import pending, submit
from tests.review_tasks import age, open_review

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
    settings.AITEAM_NOTIFY_ALLOW_PRIVATE_WEBHOOKS = True  # the fake endpoint listens on loopback
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

    assert sending.notifications_requeue_due() == 0  # not due yet: the beat leaves it alone
    assert sending.notifications_requeue_due(now=note.next_attempt_at) == 1  # due: queued again
    later = note.next_attempt_at + timedelta(seconds=1)
    assert sending.notification_send(note.pk, now=later) is None  # sent this time
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
        sending.notification_send(note.pk, now=note.next_attempt_at)
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

    monkeypatch.setattr(send_notification, "retry", retry)
    with pytest.raises(Retry):
        send_notification(note.pk)  # called as a worker would, not eagerly
    assert retried["countdown"] == 60.0


def test_the_events_that_notify_are_the_ones_the_model_indexes_for_lost_notifications():
    from lifecycle.models.audit import NOTIFYING_EVENTS
    from lifecycle.notifications.handlers import NOTIFIERS

    assert set(NOTIFIERS) == set(NOTIFYING_EVENTS)


def test_an_event_whose_notifications_were_lost_on_the_way_is_notified_by_the_beat(acme_project, rita_with_mail,
                                                                                    monkeypatch):
    """The relay committed, then queuing notify_for_event failed (a broker that was down, a worker that died):
    nothing is lost for long, and nothing is sent twice."""
    from lifecycle.notifications.handlers import events_requeue_unnotified
    from lifecycle.tasks import notify_for_event

    with monkeypatch.context() as down:
        down.setattr(notify_for_event, "delay", lambda event_id: (_ for _ in ()).throw(ConnectionError("broker down")))
        open_review(acme_project)
    event = OutboxEvent.objects.get(name="ReviewTaskOpened")
    assert event.sent_at is not None and event.notified_at is None and not mail.outbox
    assert events_requeue_unnotified() == 0  # just relayed: maybe still on its way
    later = timezone.now() + timedelta(minutes=3)
    assert events_requeue_unnotified(now=later) == 1
    event.refresh_from_db()
    assert event.notified_at is not None and len(mail.outbox) == 1
    assert events_requeue_unnotified(now=later) == 0  # notified: never again
    assert events_requeue_unnotified(now=timezone.now() + timedelta(days=2)) == 0


def test_events_that_notify_nobody_are_not_searched_and_a_worked_out_one_is_marked(acme_project, rita):
    from lifecycle.notifications.handlers import events_requeue_unnotified, notify_for_event

    five_minutes_ago = timezone.now() - timedelta(minutes=5)
    OutboxEvent.objects.create(name="RequirementReceived", payload={}, sent_at=five_minutes_ago)  # notifies nobody
    orphan = OutboxEvent.objects.create(name="ReviewTaskReminded", payload={"review_task": None},
                                        sent_at=five_minutes_ago)
    assert events_requeue_unnotified() == 1  # the reminder only
    notify_for_event(orphan.pk)  # no task any more: nothing to send, but worked out
    orphan.refresh_from_db()
    assert orphan.notified_at is not None
    assert events_requeue_unnotified() == 0


def test_the_beat_spaces_its_copies_of_a_lost_event_and_gives_up_after_a_day_with_a_warning(
        acme_project, rita, monkeypatch, caplog):
    """A notify_for_event stuck behind a long queue (or failing every time) is queued again after as long
    as it has been lost, not every minute; its last try in the day says so."""
    from lifecycle.notifications.handlers import events_requeue_unnotified
    from lifecycle.tasks import notify_for_event

    queued = []
    monkeypatch.setattr(notify_for_event, "delay", queued.append)  # the broker takes it; no worker gets to it
    relayed = timezone.now() - timedelta(minutes=3)
    event = OutboxEvent.objects.create(name="ReviewTaskReminded", payload={"review_task": None}, sent_at=relayed)
    beats = [relayed + timedelta(minutes=m) for m in range(3, 60)]  # one a minute, from 3 minutes after the relay
    copies = [beat - relayed for beat in beats if events_requeue_unnotified(now=beat)]
    assert copies == [timedelta(minutes=m) for m in (3, 6, 12, 24, 48)]
    assert queued == [event.pk] * 5

    caplog.set_level("WARNING", logger="lifecycle.notifications.handlers")
    assert events_requeue_unnotified(now=relayed + timedelta(hours=13)) == 1
    assert "queued for the last time" in caplog.text and "ReviewTaskReminded" in caplog.text
    assert events_requeue_unnotified(now=relayed + timedelta(hours=23, minutes=59)) == 0  # its next turn is past the day


def test_what_the_broker_did_not_take_is_tried_again_at_the_next_beat_not_after_the_spacing(
        acme_project, rita, hook, monkeypatch):
    from lifecycle.notifications.handlers import events_requeue_unnotified
    from lifecycle.tasks import notify_for_event

    def broker_down(pk):
        raise ConnectionError("broker down")

    relayed = timezone.now() - timedelta(minutes=10)
    event = OutboxEvent.objects.create(name="ReviewTaskReminded", payload={"review_task": None}, sent_at=relayed)
    hook.statuses = [500]
    open_review(acme_project)
    note = Notification.objects.get(channel="webhook")  # failed once; due again after its backoff
    monkeypatch.setattr(notify_for_event, "delay", broker_down)
    monkeypatch.setattr(send_notification, "delay", broker_down)
    now = note.next_attempt_at + timedelta(minutes=10)
    for beat in (now, now + timedelta(minutes=1)):
        assert events_requeue_unnotified(now=beat) == 1 and sending.notifications_requeue_due(now=beat) == 1
    event.refresh_from_db()
    note.refresh_from_db()
    assert event.notify_requeue_at is None and note.requeue_at is None


def test_events_never_queued_again_go_before_those_the_beat_keeps_retrying(acme_project, rita, monkeypatch):
    from lifecycle.notifications.handlers import events_requeue_unnotified
    from lifecycle.tasks import notify_for_event

    queued = []
    monkeypatch.setattr(notify_for_event, "delay", queued.append)
    now = timezone.now()
    failing = [OutboxEvent.objects.create(name="ReviewTaskReminded", payload={}, sent_at=now - timedelta(hours=2),
                                          notify_requeue_at=now - timedelta(minutes=1)) for _ in range(3)]
    fresh = OutboxEvent.objects.create(name="ReviewTaskOpened", payload={}, sent_at=now - timedelta(minutes=5))
    assert events_requeue_unnotified(now=now, limit=1) == 1 and queued == [fresh.pk]
    assert events_requeue_unnotified(now=now, limit=5) == 3 and sorted(queued[1:]) == [e.pk for e in failing]


def test_a_due_row_stuck_behind_a_long_queue_is_queued_again_spaced_and_a_claim_starts_it_afresh(
        acme_project, rita, hook, monkeypatch):
    hook.statuses = [500]
    open_review(acme_project)
    note = Notification.objects.get(channel="webhook")  # failed once; due again after its backoff
    queued = []
    monkeypatch.setattr(send_notification, "delay", queued.append)
    due = note.next_attempt_at
    beats = [due + timedelta(minutes=m) for m in range(0, 20)]
    copies = [beat - due for beat in beats if sending.notifications_requeue_due(now=beat)]
    assert copies == [timedelta(minutes=m) for m in (0, 2, 4, 8, 16)]
    assert queued == [note.pk] * 5

    later = due + timedelta(minutes=17)
    assert sending.notification_send(note.pk, now=later) is None  # one copy gets through and sends it
    note.refresh_from_db()
    assert (note.state, note.requeue_at) == ("sent", None) and len(hook.bodies) == 2


def test_migration_0016_marks_only_the_relayed_events_that_notify_as_notified(db):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("lifecycle.migrations.0016_outbox_notified_at")
    relayed = timezone.now() - timedelta(days=30)
    opened = OutboxEvent.objects.create(name="ReviewTaskOpened", payload={}, sent_at=relayed)
    other = OutboxEvent.objects.create(name="RequirementReceived", payload={}, sent_at=relayed)
    unsent = OutboxEvent.objects.create(name="ReviewTaskOpened", payload={})
    migration.mark_relayed_as_notified(apps, None)
    marked = dict(OutboxEvent.objects.values_list("pk", "notified_at"))
    assert (marked[opened.pk], marked[other.pk], marked[unsent.pk]) == (relayed, None, None)


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


# --- A project's webhook URL is tenant input: public addresses only, no redirects, a total deadline.

def webhook_rows():
    return list(Notification.objects.filter(channel="webhook").values_list("state", "attempts", "last_error"))


def test_a_project_webhook_on_an_internal_address_is_refused_for_good(acme_project, rita, settings):
    settings.AITEAM_NOTIFY_WEBHOOK_URL = ""
    with WebhookServer() as internal:
        acme_project.settings = {"notifications": {"webhook_url": f"{internal.url}/services/T0/B0/secret-token"}}
        acme_project.save()
        open_review(acme_project)
    assert internal.requests == []
    [(state, attempts, error)] = webhook_rows()
    assert (state, attempts) == ("failed", 1)  # permanent: no retry, no backoff
    assert error == ("ChannelRefused: the project's webhook host resolves to a loopback address; "
                     "only public addresses are allowed")
    assert "secret-token" not in error and str(internal.port) not in error


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
                                     "100.64.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1", "::1", "fe80::1", "fc00::1",
                                     "::ffff:127.0.0.1", "::ffff:169.254.169.254"])
def test_internal_addresses_are_not_public(address):
    assert webhook.non_public(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700:4700::1111"])
def test_public_addresses_are(address):
    assert webhook.non_public(address) == ""


def test_the_operators_own_webhook_may_point_at_an_internal_address(acme_project, rita, settings):
    with WebhookServer() as internal:
        settings.AITEAM_NOTIFY_WEBHOOK_URL = f"{internal.url}/hook"
        open_review(acme_project)
    assert [r["path"] for r in internal.requests] == ["/hook"] and webhook_rows() == [("sent", 1, "")]


def test_the_post_goes_to_the_checked_address_and_names_the_urls_host(acme_project, rita, settings):
    settings.AITEAM_NOTIFY_WEBHOOK_URL = ""
    settings.AITEAM_NOTIFY_ALLOW_PRIVATE_WEBHOOKS = True
    with WebhookServer() as endpoint:
        acme_project.settings = {"notifications": {"webhook_url": f"http://localhost:{endpoint.port}/in?x=1"}}
        acme_project.save()
        open_review(acme_project)
    [request] = endpoint.requests
    assert (request["host"], request["path"]) == (f"localhost:{endpoint.port}", "/in?x=1")
    assert json.loads(request["body"])["text"].startswith("*New review task")


def test_a_redirect_is_not_followed_and_fails_for_good(acme_project, rita, settings):
    with WebhookServer() as inside, WebhookServer(status=302, headers={"Location": f"{inside.url}/admin"}) as hop:
        settings.AITEAM_NOTIFY_WEBHOOK_URL = f"{hop.url}/hook"
        open_review(acme_project)
    assert len(hop.requests) == 1 and inside.requests == []
    assert webhook_rows() == [("failed", 1, "ChannelRefused: webhook answered HTTP 302; redirects are not followed, "
                                            "configure the final URL")]


@pytest.mark.parametrize("url,problem", [
    ("ftp://hooks.example.com/x", "must start with https:// or http://"),
    ("https:///services/x", "has no host"),
    ("hooks.example.com/x", "must start with https:// or http://"),
    ("https://hooks.example.com:99999/x", "is malformed"),
    ("https://hooks.example.com/a b", "contains spaces or control characters"),
])
def test_the_project_form_refuses_a_webhook_url_without_scheme_or_host(acme_project, url, problem):
    form = ProjectForm(instance=acme_project, data=project_form_data(
        acme_project, settings=json.dumps({"notifications": {"webhook_url": url}})))
    assert form.errors["settings"] == [f"notifications.webhook_url {problem} (an https:// or http:// URL with a host)"]


def test_the_project_form_takes_an_https_url_with_a_host(acme_project):
    form = ProjectForm(instance=acme_project, data=project_form_data(
        acme_project, settings=json.dumps({"notifications": {"webhook_url": "https://hooks.slack.com/services/T/B/x"}})))
    assert form.is_valid(), form.errors


# --- Whatever goes wrong in a channel ends on the failure path: retried, then given up.

def test_a_garbled_webhook_answer_is_retried_then_given_up(acme_project, rita, settings):
    settings.AITEAM_NOTIFY_MAX_ATTEMPTS = 2
    with WebhookServer(raw=b"NOT HTTP AT ALL\r\n\r\n") as garbled:
        settings.AITEAM_NOTIFY_WEBHOOK_URL = f"{garbled.url}/hook"
        open_review(acme_project)
        error = "ChannelError: webhook gave a malformed answer (BadStatusLine)"
        assert webhook_rows() == [("pending", 1, error)]
        note = Notification.objects.get(channel="webhook")
        assert sending.notification_send(note.pk, now=note.next_attempt_at) is None
    assert webhook_rows() == [("failed", 2, error)]


def test_an_unexpected_error_in_a_channel_is_recorded_and_counts_towards_giving_up(acme_project, rita, hook, settings,
                                                                                 monkeypatch):
    settings.AITEAM_NOTIFY_MAX_ATTEMPTS = 2

    def broken(note):
        raise RuntimeError("the channel has a bug")

    monkeypatch.setitem(CHANNELS, "webhook", broken)
    open_review(acme_project)
    assert webhook_rows() == [("pending", 1, "RuntimeError: the channel has a bug")]
    note = Notification.objects.get(channel="webhook")
    sending.notification_send(note.pk, now=note.next_attempt_at)
    assert webhook_rows() == [("failed", 2, "RuntimeError: the channel has a bug")]


# --- A send that outlasts its claim: the newer claim's outcome stands, and sends are bounded in time.

def test_a_send_that_outlasted_its_claim_cannot_overwrite_the_newer_one(acme_project, rita, hook, settings,
                                                                            monkeypatch):
    settings.AITEAM_NOTIFY_MAX_ATTEMPTS = 2
    open_review(acme_project)  # sent on commit; made due again below, for two workers
    started = timezone.now()
    Notification.objects.update(state="pending", attempts=0, next_attempt_at=started, last_error="")
    hook.statuses = [200, 500]  # the second worker sends it; the first, slow one fails afterwards
    real_send = CHANNELS["webhook"]

    def slow_first_worker(note):
        CHANNELS["webhook"] = real_send  # meanwhile its lease ran out and a second worker took the row
        assert sending.notification_send(note.pk, now=started + sending.claim_lease() + timedelta(seconds=1)) is None
        real_send(note)

    monkeypatch.setitem(CHANNELS, "webhook", slow_first_worker)
    assert sending.notification_send(Notification.objects.get().pk, now=started) is None
    assert webhook_rows() == [("sent", 2, "")] and len(hook.bodies) == 3


def test_a_webhook_that_drips_its_answer_is_cut_off_at_the_total_deadline(acme_project, rita, settings):
    settings.AITEAM_NOTIFY_TIMEOUT_S = 0.5
    with WebhookServer(drip_s=0.15) as dripping:  # each byte well within a socket timeout, the whole over 5 s
        settings.AITEAM_NOTIFY_WEBHOOK_URL = f"{dripping.url}/hook"
        started = time.monotonic()
        open_review(acme_project)
        took = time.monotonic() - started
    assert webhook_rows() == [("pending", 1, "ChannelError: webhook did not answer within 0.5s")]
    assert took < 2.5


def test_the_claim_outlasts_every_channels_time_limit(settings):
    assert settings.EMAIL_TIMEOUT == 10.0
    assert sending.claim_lease() > timedelta(seconds=2 * max(settings.EMAIL_TIMEOUT, settings.AITEAM_NOTIFY_TIMEOUT_S))


# --- Only current, active members of the organization hear of its tasks.

@pytest.mark.parametrize("how", ["left the organization", "was deactivated"])
def test_a_former_member_holding_a_task_hears_nothing_and_the_reviewers_do(acme_project, rita_with_mail, how):
    fred = MembershipFactory(organization=acme_project.organization, role="reviewer",
                             user__username="fred", user__email="fred@acme.test").user
    task = open_review(acme_project)
    ReviewTask.objects.filter(pk=task.pk).update(assignee=fred)
    if how == "left the organization":
        fred.memberships.all().delete()
    else:
        get_user_model().objects.filter(pk=fred.pk).update(is_active=False)
    mail.outbox.clear()
    task = age(task, hours=25)
    assert review_sweep() == {"remind": 1}
    assert [m.to for m in mail.outbox] == [["rita@acme.test"]]
    task.refresh_from_db()
    assert recipients.holders(task) == [] and recipients.reviewers(task) == [rita_with_mail]


def test_a_group_hand_over_notifies_only_members_of_the_tasks_organization(alice, rita, oscar):
    group = Group.objects.create(name="shared-reviewers")
    group.user_set.add(rita, oscar)
    task = pending(submit(alice), "stories_approval")
    ReviewTask.objects.filter(pk=task.pk).update(assignee_group=group)
    assert recipients.reviewers(ReviewTask.objects.get(pk=task.pk)) == [rita]
