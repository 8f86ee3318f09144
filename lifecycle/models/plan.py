"""The implementation plan: tasks with their stories, files and dependencies.

Execution is recorded on Step rows ("engineer:<key>" per attempt); a task row only says
what is to be built and what it waits for.
"""
from django.db import models


class ImplementationTask(models.Model):
    requirement = models.ForeignKey("lifecycle.Requirement", on_delete=models.CASCADE, related_name="plan_tasks")
    key = models.CharField(max_length=20)
    position = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    story_refs = models.JSONField(default=list, help_text="positions of the approved stories it serves")
    files = models.JSONField(default=list)
    depends_on = models.JSONField(default=list, help_text="keys of tasks that must be done first")
    definition_of_done = models.TextField()

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["requirement", "key"], name="one_plan_task_per_key")]

    def __str__(self) -> str:
        return f"{self.key}: {self.title}"
