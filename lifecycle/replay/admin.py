"""The Requirement admin's replay parts: the "Replay selected requirements" action and the comparison display."""
from typing import Any

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from lifecycle.errors import IllegalTransition, NotPermitted
from lifecycle.models import Replay
from lifecycle.replay.compare import describe
from lifecycle.replay.runs import replay_start


class ReplayAdminMixin:
    """Mixed into RequirementAdmin (before ModelAdmin)."""

    actions = ["replay_selected"]

    def get_readonly_fields(self, request, obj=None):
        return [*super().get_readonly_fields(request, obj), "replay_of", "replay_result"]

    @admin.action(description="Replay selected requirements")
    def replay_selected(self, request, queryset):
        for source in queryset:
            try:
                replay = replay_start(source_id=source.pk, user=request.user, via="admin")
            except (IllegalTransition, NotPermitted) as exc:
                self.message_user(request, f"{source}: {exc}", messages.ERROR)
                continue
            self.message_user(request, format_html(
                '{}: replay <a href="{}">{}</a> started; its comparison shows on its page when it comes to rest',
                source, _url(replay.pk), replay.pk))

    @admin.display(description="replay")
    def replay_result(self, requirement):
        """On a replay: the verdict and what differs. On a source: its replays (escaped, never |safe)."""
        run = Replay.objects.filter(requirement=requirement).first()
        if run is None:
            rows = Replay.objects.filter(requirement__replay_of=requirement).order_by("-created_at")[:20]
            items = ((_url(r.requirement_id), r.requirement_id, r.verdict, r.created_at.strftime("%Y-%m-%d %H:%M"))
                     for r in rows)
            return format_html("<ul>{}</ul>", format_html_join("", '<li><a href="{}">{}</a>: {} ({})</li>', items)) \
                if rows else "—"
        return _comparison(run)


def _comparison(run: Replay) -> str:
    result = run.comparison
    if not result:
        return format_html("<b>{}</b>: not compared yet", run.verdict)
    transitions, artifacts = result["transitions"], result["artifacts"]
    differences = format_html_join("", "<li>{}</li>", ((line,) for line in describe(result)))
    return format_html(
        '<b>{}</b> (compared {}) · replay of <a href="{}">{}</a><br>transitions: source {}, replay {} · '
        "artifacts: source {}, replay {} · model calls replayed {}<ul>{}</ul>",
        run.verdict, run.compared_at.strftime("%Y-%m-%d %H:%M:%S"), _url(run.requirement.replay_of_id),
        result["source"], len(transitions["source"]), len(transitions["replay"]), len(artifacts["source"]),
        len(artifacts["replay"]), result["requests"]["compared"], differences,
    )


def _url(requirement_id: Any) -> str:
    """Its admin page, from the id alone (a list of replays links each without loading it)."""
    return reverse("admin:lifecycle_requirement_change", args=[requirement_id])
