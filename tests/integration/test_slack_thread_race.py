"""Two people mentioning the bot in one Slack thread no conversation is bound to yet, at once, on PostgreSQL: the
second's binding waits on the unique thread key for the first's transaction, fails, and its message goes into the
conversation the first bound; neither is taken for a Slack retry."""
import threading

import pytest
from django.db import connection

from lifecycle.models import Conversation, ConversationChannelBinding, Message, SlackIdentity, SlackWorkspace
from lifecycle.services import slack as slack_service

pytestmark = pytest.mark.django_db(transaction=True)
TEAM = "T0ACME"


def test_two_people_starting_in_one_thread_at_once_share_its_conversation(acme, rita, sam, monkeypatch):
    workspace = SlackWorkspace.objects.create(organization=acme, team_id=TEAM, bot_token_env="SLACK_BOT_TOKEN")
    for user, slack_id in ((rita, "URITA"), (sam, "USAM")):
        SlackIdentity.objects.create(workspace=workspace, slack_user_id=slack_id, user=user)
    both_looked, looked_up, seen = threading.Barrier(2), slack_service.thread_binding, threading.local()

    def both_find_none_first(key):
        binding = looked_up(key)
        if not getattr(seen, "once", False):  # each request's first lookup: neither has bound the thread yet
            seen.once = True
            both_looked.wait(timeout=10)
        return binding

    monkeypatch.setattr(slack_service, "thread_binding", both_find_none_first)
    outcomes = []

    def mention(user_id: str, ts: str) -> None:
        try:
            event = {"type": "app_mention", "user": user_id, "text": f"<@UBOT> what failed? ({user_id})",
                     "channel": "C1", "ts": ts, "thread_ts": "50.0", "channel_type": "channel"}
            outcomes.append(slack_service.slack_message_take(workspace=workspace, event=event, event_id=f"Ev{ts}"))
        finally:
            connection.close()

    threads = [threading.Thread(target=mention, args=args) for args in (("URITA", "50.1"), ("USAM", "50.2"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes) == ["posted", "started"], outcomes
    conversation = ConversationChannelBinding.objects.get().conversation
    assert Conversation.objects.count() == 1
    assert {m.user for m in Message.objects.filter(conversation=conversation, author="person")} == {rita, sam}
