"""Slack, both ways (issue 24): the workspaces the operator's Slack app is installed in, which organization each
belongs to, who each Slack user is here, and the Slack messages already taken in (a repeat does nothing)."""
from django.conf import settings
from django.db import models


class SlackWorkspace(models.Model):
    """A Slack workspace (team) whose events and button presses belong to one organization. The operator adds it
    (SuperuserOnly): whoever names a team id receives its people's messages."""

    organization = models.ForeignKey("lifecycle.Organization", on_delete=models.CASCADE, related_name="slack_workspaces")
    team_id = models.CharField(max_length=20, unique=True, help_text="Slack's team id, e.g. T0123ABCD")
    bot_token_env = models.CharField(max_length=100, help_text="the variable holding the bot token (xoxb-…), one of "
                                                               "AITEAM_SLACK_TOKEN_ENVS")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.team_id} ({self.organization})"


class SlackIdentity(models.Model):
    """A Slack user of a workspace is this aiteam user: what they write or press in Slack is done as that user,
    with that user's permissions. Unmapped Slack users are ignored."""

    workspace = models.ForeignKey(SlackWorkspace, on_delete=models.CASCADE, related_name="identities")
    slack_user_id = models.CharField(max_length=20, help_text="Slack's user id, e.g. U0123ABCD")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_identities")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "slack identities"
        constraints = [models.UniqueConstraint(fields=["workspace", "slack_user_id"], name="one_user_per_slack_user")]

    def __str__(self) -> str:
        return f"{self.slack_user_id} = {self.user}"


class SlackMessageSeen(models.Model):
    """A Slack message taken in, by its channel and ts: Slack's retries (X-Slack-Retry-Num, the same event_id)
    and the second event of one message (app_mention and message both report a mention) find it and do nothing.
    Written in the transaction that writes the conversation's message."""

    workspace = models.ForeignKey(SlackWorkspace, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=20)
    ts = models.CharField(max_length=20)
    event_id = models.CharField(max_length=40, blank=True)
    message = models.ForeignKey("lifecycle.Message", null=True, on_delete=models.SET_NULL, related_name="+")
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name, verbose_name_plural = "slack message seen", "slack messages seen"
        constraints = [models.UniqueConstraint(fields=["workspace", "channel", "ts"], name="one_row_per_slack_message")]
