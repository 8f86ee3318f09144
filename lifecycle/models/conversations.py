"""Conversations with the team's assistant (ADR 36): channel-agnostic rows, the tool calls each answer made, and
the approval requests its mutating tools turn into."""
import json
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class Conversation(models.Model):
    """A conversation of an organization's people with the assistant, about one requirement or none; started by a
    person or by the system (an event such as a delivery or an escalation)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey("lifecycle.Organization", on_delete=models.CASCADE, related_name="conversations")
    requirement = models.ForeignKey("lifecycle.Requirement", null=True, blank=True, on_delete=models.CASCADE,
                                    related_name="conversations")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="empty: the system started it")
    title = models.CharField(max_length=200)
    event = models.CharField(max_length=60, blank=True, help_text="the event a system conversation was started by")
    outbox_event = models.OneToOneField("lifecycle.OutboxEvent", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="conversation",
                                        help_text="the event occurrence a system conversation was started by (one each)")
    summary = models.TextField(blank=True, help_text="the earlier turns, folded")
    summary_through = models.PositiveIntegerField(default=0, help_text="the last message seq the summary covers")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["organization", "-updated_at"], name="conversation_recent")]

    def __str__(self) -> str:
        return self.title


class ConversationParticipant(models.Model):
    """A person in a conversation, and how far they have read (the unread count in the admin header)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="participants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    last_read_seq = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["conversation", "user"], name="one_participant_per_user")]


class Channel(models.TextChoices):
    WEB = "web"
    API = "api"
    SLACK = "slack"
    EMAIL = "email"
    SYSTEM = "system"


class ConversationChannelBinding(models.Model):
    """Where else a conversation goes on: a Slack thread (`external_id` = "team:channel:thread_ts"), an e-mail
    thread. The web is every conversation's channel and needs no binding."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="bindings")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    external_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["channel", "external_id"], name="one_conversation_per_thread")]


class Message(models.Model):
    """One turn. A person's message is done when written; the assistant's answer is a row written `pending` in
    the same transaction, so a lost task or a crashed worker leaves a row to answer, never a question without
    one."""

    class Author(models.TextChoices):
        PERSON = "person"
        ASSISTANT = "assistant"
        SYSTEM = "system"

    class State(models.TextChoices):
        PENDING = "pending"
        ANSWERING = "answering"
        DONE = "done"
        FAILED = "failed"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    author = models.CharField(max_length=10, choices=Author.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    channel = models.CharField(max_length=10, choices=Channel.choices, default=Channel.WEB)
    text = models.TextField(blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.DONE)
    in_reply_to = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    route = models.JSONField(default=dict, blank=True, help_text="the specialists the supervisor chose, and why")
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [models.UniqueConstraint(fields=["conversation", "seq"], name="one_message_per_seq")]
        indexes = [models.Index(fields=["created_at"], name="message_unanswered",
                                condition=Q(state__in=["pending", "answering"]))]

    def __str__(self) -> str:
        return f"{self.conversation_id} #{self.seq} {self.author}"


class ToolKind(models.TextChoices):
    READ = "read"
    SUGGEST = "suggest"
    MUTATE = "mutate"


class ToolCall(models.Model):
    """A tool a specialist called while answering, with what it returned; a mutating one names its approval
    request instead of a result."""

    class Status(models.TextChoices):
        DONE = "done"
        REFUSED = "refused"
        AWAITING_APPROVAL = "awaiting_approval"
        PRE_AUTHORIZED = "pre_authorized"

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="tool_calls")
    specialist = models.CharField(max_length=40)
    tool = models.CharField(max_length=60)
    kind = models.CharField(max_length=10, choices=ToolKind.choices)
    arguments = models.JSONField(default=dict, blank=True)
    result = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=Status.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


PROPOSED_TEXTS = ("feedback", "constraint", "budget", "reason")  # an action's arguments that become someone's words


class ActionApproval(models.Model):
    """An action a mutating tool asked for, waiting for a person (or run at once under a pre-authorization); the
    row is its audit: who asked, who decided, how, and what came of it. Never deleted with its conversation."""

    class State(models.TextChoices):
        PENDING = "pending"
        REJECTED = "rejected"
        DONE = "done"
        FAILED = "failed"
        SUPERSEDED = "superseded"  # what it would decide was decided another way, or its requirement ended

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey("lifecycle.Organization", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("lifecycle.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    conversation = models.ForeignKey(Conversation, null=True, on_delete=models.SET_NULL, related_name="approvals")
    tool_call = models.OneToOneField(ToolCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="approval")
    action = models.CharField(max_length=60)
    arguments = models.JSONField(default=dict, blank=True)
    summary = models.CharField(max_length=300, help_text="what the action does, as the person is asked")
    requested_for = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+",
                                      help_text="the person whose question led to it")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    decided_via = models.CharField(max_length=20, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    preauthorization = models.ForeignKey("lifecycle.ActionPreauthorization", null=True, blank=True,
                                         on_delete=models.SET_NULL, related_name="uses")
    result = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organization", "created_at"], name="approval_pending",
                                condition=Q(state="pending"))]

    def __str__(self) -> str:
        return f"{self.action} ({self.state})"

    @property
    def proposed(self) -> dict[str, str]:
        """What approving records as the approver's own words, as the assistant wrote them (untrusted: shown
        literally where the person decides): feedback, a constraint, new limits (as JSON), a reason; those given."""
        arguments = self.arguments or {}
        return {name: value if isinstance(value, str) else json.dumps(value, sort_keys=True)
                for name in PROPOSED_TEXTS if (value := arguments.get(name)) not in (None, "")}


class ActionPreauthorization(models.Model):
    """A project's admins let an action type run at once when the assistant asks for it there, as the asker, with
    the asker's permissions."""

    project = models.ForeignKey("lifecycle.Project", on_delete=models.CASCADE, related_name="preauthorizations")
    action = models.CharField(max_length=60)
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "action"], name="one_preauthorization_per_action")]

    def __str__(self) -> str:
        return f"{self.project}: {self.action}"
