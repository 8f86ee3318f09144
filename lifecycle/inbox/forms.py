"""Forms of the review page and the bulk actions. Services validate again; these give early, clear errors."""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import NON_FIELD_ERRORS
from django.db.models import QuerySet

from lifecycle.api.parsers import BoundedJSONFormField
from lifecycle.models import UserStory
from lifecycle.states import Decision


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=Decision.choices)
    reason = forms.CharField(required=False, max_length=4000)
    feedback = forms.CharField(required=False, max_length=8000)
    answer = forms.CharField(required=False, max_length=8000)
    constraint = forms.CharField(required=False, max_length=2000)
    budget = forms.CharField(required=False)  # JSON, read only for an override (clean_budget)
    # the version of the stories the page showed (story_edits.stories_version); the page sends the one it rendered
    stories_version = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)

    def clean_stories_version(self) -> str | None:
        return self.cleaned_data["stories_version"] or None

    def clean_budget(self) -> Any:
        """The budget page posts its limits box with every button: only an override reads it, so a half-edited
        box never blocks another decision."""
        if self.cleaned_data.get("decision") != Decision.OVERRIDE_BUDGET:
            return None
        return BoundedJSONFormField(required=False).clean(self.cleaned_data["budget"])

    def clean(self) -> dict[str, Any]:
        """The budget page posts every field with whichever button was pressed: keep only the chosen option's."""
        data = super().clean()
        if data.get("decision") != Decision.INJECT_CONSTRAINT:
            data["constraint"] = ""
        return data


class BulkDecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[(Decision.APPROVE, "Approve"), (Decision.REJECT, "Reject")],
                                 widget=forms.RadioSelect)
    reason = forms.CharField(required=False, max_length=4000, widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
                             help_text="One reason for every selected task; required to reject.")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("decision") == Decision.REJECT and not data.get("reason", "").strip():
            self.add_error("reason", "Give the reason the tasks are rejected for.")
        return data


class AssignForm(forms.Form):
    user = forms.ModelChoiceField(queryset=get_user_model().objects.none(), required=False, empty_label="— a reviewer —")
    group = forms.ModelChoiceField(queryset=Group.objects.none(), required=False, empty_label="— or a group —")

    def __init__(self, *args: Any, users: list[Any] | None = None, groups: QuerySet[Group] | None = None,
                 **kwargs: Any) -> None:
        """`users` and `groups`: who may be assigned (services.assignment.assignable_users and assignable_groups)."""
        super().__init__(*args, **kwargs)
        pks = [u.pk for u in users or []]
        self.fields["user"].queryset = get_user_model().objects.filter(pk__in=pks).order_by("username")
        self.fields["group"].queryset = groups if groups is not None else Group.objects.none()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not self.errors and bool(data.get("user")) == bool(data.get("group")):  # else: say what was wrong with it
            raise forms.ValidationError("Choose a reviewer or a group (one of them).")
        return data


class StoryForm(forms.Form):
    """A draft story as a reviewer edits it; acceptance criteria one per line."""

    title = forms.CharField(max_length=200)
    as_a = forms.CharField(max_length=300, label="As a")
    i_want = forms.CharField(max_length=2000, label="I want", widget=forms.Textarea(attrs={"rows": 2, "cols": 80}))
    so_that = forms.CharField(max_length=2000, label="So that", widget=forms.Textarea(attrs={"rows": 2, "cols": 80}))
    acceptance_criteria = forms.CharField(label="Acceptance criteria (one per line)",
                                          widget=forms.Textarea(attrs={"rows": 4, "cols": 80}))
    priority = forms.ChoiceField(choices=UserStory.Priority.choices)
    story_points = forms.TypedChoiceField(choices=[(n, n) for n in (1, 2, 3, 5, 8, 13)], coerce=int)
    # the story's version when the form was opened (story_edits.story_version); the page sends the one it rendered
    version = forms.CharField(max_length=64, widget=forms.HiddenInput)

    def version_read(self) -> str | None:
        """The version this posted form was opened on, kept when it is shown again for its own mistakes (a save
        after correcting them is still compared with what the reviewer read); None once the story changed since:
        the page then shows the story as it is now and that is what was read."""
        return None if self.has_error(NON_FIELD_ERRORS, "stories_changed") else self.data.get("version", "")

    @classmethod
    def for_story(cls, story: UserStory) -> StoryForm:
        initial = {field: getattr(story, field) for field in cls.base_fields if field != "version"}
        initial["acceptance_criteria"] = "\n".join(story.acceptance_criteria)
        return cls(initial=initial).placed_at(story)

    def placed_at(self, story: UserStory) -> StoryForm:
        """Ids by the story's position, so the page's story forms never share one (a posted form is placed too)."""
        self.auto_id = f"id_story{story.position}_%s"
        return self

    def clean_acceptance_criteria(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data["acceptance_criteria"].splitlines()]
        return [line for line in lines if line]
