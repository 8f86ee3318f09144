"""User stories, one set per BA round; rejected rounds are kept, never overwritten."""
import uuid

from django.conf import settings
from django.db import models
from django_fsm import FSMField, FSMModelMixin, transition

from lifecycle.states import StoryState as S


class UserStory(FSMModelMixin, models.Model):
    class Priority(models.TextChoices):
        MUST = "must"
        SHOULD = "should"
        COULD = "could"
        WONT = "wont"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    requirement = models.ForeignKey("lifecycle.Requirement", on_delete=models.CASCADE, related_name="stories")
    round = models.PositiveIntegerField()
    position = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    as_a = models.CharField(max_length=300)
    i_want = models.TextField()
    so_that = models.TextField()
    acceptance_criteria = models.JSONField(default=list)
    priority = models.CharField(max_length=10, choices=Priority.choices)
    story_points = models.PositiveSmallIntegerField()
    state = FSMField(default=S.DRAFT, choices=S.choices, protected=True)
    rejection_reason = models.TextField(blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    decided_by_policy = models.CharField(max_length=40, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["round", "position"]
        verbose_name_plural = "user stories"
        constraints = [
            models.UniqueConstraint(fields=["requirement", "round", "position"], name="one_story_per_slot"),
        ]

    def __str__(self) -> str:
        return self.title

    @transition(state, source=S.DRAFT, target=S.APPROVED)
    def approve(self) -> None: ...

    @transition(state, source=S.DRAFT, target=S.REJECTED)
    def reject(self) -> None: ...

    @transition(state, source=S.APPROVED, target=S.IN_PROGRESS)
    def start(self) -> None: ...

    @transition(state, source=S.IN_PROGRESS, target=S.DONE)
    def finish(self) -> None: ...
