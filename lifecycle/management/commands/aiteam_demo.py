"""Run the bundled sample brief through the team on the embedded default and print what happened:
the requirement, its stories, the plan, the workspace's commits, the test reports, the audit trail."""
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from lifecycle.models import Membership, Organization, Project, Requirement
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.development import workspace_for
from lifecycle.services.intake import requirement_submit
from lifecycle.states import Role

SAMPLE_BRIEF = Path(settings.BASE_DIR) / "agents/cassettes/sample_brief.md"


class Command(BaseCommand):
    help = "Submit the sample brief and print the requirement, its stories and its transitions."

    def add_arguments(self, parser):
        parser.add_argument("--brief", type=Path, default=SAMPLE_BRIEF)

    def handle(self, *args, brief, **options):
        if not settings.CELERY_TASK_ALWAYS_EAGER:
            self.stdout.write("Celery is not eager: steps run on your workers; this command only submits.")
        if not settings.AITEAM_AUTONOMOUS:
            self.stdout.write("Autonomous mode is off: the stories wait for a reviewer in the admin.")
        user = self._demo_user()
        text = brief.read_text(encoding="utf-8")
        title, _, body = text.partition("\n")
        requirement = requirement_submit(user=user, brief=body.strip(), title=title.lstrip("# ").strip(), via="cli")
        self._report(Requirement.objects.get(pk=requirement.pk))

    def _demo_user(self):
        org, _ = Organization.objects.get_or_create(slug="demo", defaults={"name": "Demo Org"})
        Project.objects.get_or_create(organization=org, slug="default", defaults={"name": "Sample project"})
        user, _ = get_user_model().objects.get_or_create(username="demo")
        Membership.objects.update_or_create(user=user, organization=org, defaults={"role": Role.ADMIN})
        return user

    def _report(self, req: Requirement) -> None:
        out = self.stdout.write
        out(f"\n=== Requirement {req.pk}\n{req.title}\nstate: {req.state}")
        doc = req.docs.order_by("-version").first()
        if doc:
            out(f"\n--- Requirement doc v{doc.version}\n{doc.summary}")
            for objective in doc.objectives:
                out(f"  objective: {objective}")
        out("\n--- User stories")
        for story in req.stories.order_by("round", "position"):
            out(f"[{story.state}] (round {story.round}, {story.priority}, {story.story_points} pts) {story.title}")
            out(f"    As a {story.as_a}, I want {story.i_want}, so that {story.so_that}.")
            for criterion in story.acceptance_criteria:
                out(f"      - {criterion}")
        out("\n--- Transitions")
        for t in req.transitions.order_by("id"):
            who = t.actor_user.username if t.actor_user else t.actor_role
            arrow = f"{t.from_state or '-':>22} → {t.to_state:<22}"
            out(f"{t.created_at:%H:%M:%S} {t.subject:<12} {t.event:<16} {arrow} by {who} ({t.via})")
        self._report_code(req)
        calls = req.llm_calls.count()
        out(f"\nLLM calls recorded: {calls} (provider: {settings.AITEAM_LLM_PROVIDER})")
        self._report_delivery(req)
        if req.state != "deployed":
            raise CommandError(f"demo did not reach deployed (state {req.state})")

    def _report_delivery(self, req: Requirement) -> None:
        out = self.stdout.write
        qc = latest(req, "test_report", "qc")
        if qc:
            out(f"\n--- Quality gate: {qc.summary}")
        delivered = latest(req, "delivery", "delivery")
        if delivered is None:
            return
        result = content_json(delivered)
        out(f"\n--- Delivered: {'yes' if result['succeeded'] else 'NO: ' + result['error']}")
        out(f"remote: {result['remote_url']}\nbranch: {result['branch']}")
        for commit in result["pushed_commits"]:
            out(f"  {commit['sha'][:10]} {commit['subject']}")
        out(f"\nTry it: git clone -b {result['branch']} {result['remote_url']} readinglist && cd readinglist && "
            "python -m pytest -q")

    def _report_code(self, req: Requirement) -> None:
        out = self.stdout.write
        for task in req.plan_tasks.all():
            out(f"plan {task.key}: {task.title} (after {', '.join(task.depends_on) or 'nothing'}) → {', '.join(task.files)}")
        workspace = workspace_for(req)
        out(f"\n--- Workspace {workspace.path} (branch {workspace.branch})")
        for sha, subject in workspace.log():
            out(f"{sha[:10]} {subject}")
        out("\n--- Test reports")
        for report in req.artifacts.filter(kind="test_report", name="self_test").order_by("version"):
            data = content_json(report)
            out(f"attempt {report.metadata['attempt']}: {report.summary} in {data['duration_s']:.1f}s"
                f"{' — failing: ' + ', '.join(data['failing_tests']) if data['failing_tests'] else ''}")
        last = req.artifacts.filter(kind="test_report").order_by("-version").first()
        if last:
            out(f"sandbox: {content_json(last)['isolation']}")
