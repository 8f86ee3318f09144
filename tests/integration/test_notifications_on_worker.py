"""A real worker notifies through a webhook that fails first: Celery retries it with backoff, and it arrives once."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lifecycle.models import Notification
from tests.flows import SAMPLE
from tests.workers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def flaky_hook():
    """Answers 503 to the first POST and 200 afterwards; records every body."""
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(503 if len(bodies) == 1 else 200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hook", bodies
    server.shutdown()
    server.server_close()


def test_a_failing_webhook_is_retried_by_celery_and_sent_once(start_worker, alice, rita, flaky_hook):
    from lifecycle.services.intake import requirement_submit

    url, bodies = flaky_hook
    start_worker("notifier", AITEAM_NOTIFY_WEBHOOK_URL=url, AITEAM_NOTIFY_BACKOFF_S="0.5")
    req = requirement_submit(user=alice, brief=SAMPLE, title="Reading list")

    note = wait_for(lambda: Notification.objects.filter(requirement=req, channel="webhook", state="sent").first(),
                    timeout=60, what="the webhook notification to be sent after its retry")
    assert (note.event, note.attempts, note.last_error) == ("review_task_opened", 2, "")
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    assert bodies[1]["text"].startswith("*New review task: Stories Approval for Reading list*")
    assert req.review_tasks.get().is_pending  # the pipeline reached its gate regardless
