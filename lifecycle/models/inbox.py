"""A reviewer's edit of a story before approving it: the story row changes, this row keeps what it was."""
from django.conf import settings
from django.db import models


class StoryEdit(models.Model):
    story = models.ForeignKey("lifecycle.UserStory", on_delete=models.CASCADE, related_name="edits")
    review_task = models.ForeignKey("lifecycle.ReviewTask", on_delete=models.CASCADE, related_name="story_edits")
    edited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    via = models.CharField(max_length=20)
    origin = models.JSONField(default=dict, blank=True, help_text="where the edit came from: address, user agent")
    before = models.JSONField(help_text="the changed fields as the agent (or an earlier edit) wrote them")
    after = models.JSONField(help_text="the changed fields as the reviewer left them")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.story} edited by {self.edited_by} ({', '.join(self.after)})"
