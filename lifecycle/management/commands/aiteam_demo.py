"""Run a brief (the bundled sample by default) through the team and print what happened:
the requirement, its stories, the plan, the workspace's commits, the test reports, the audit trail.

Autonomous mode approves the stories. The demo project pre-authorizes deployments, but a deployment that adds a CI
workflow still waits for a person, and every run adds one. With --approve-deployment (`make demo` passes it) the
operator at the terminal approves that gate: a decision recorded under the demo user's name, via cli, with the
reason printed (ADR 27, ADR 36).

A user's mistake (no such file, an empty one, a brief the replay cassette never recorded) ends in one line
saying what to do and a non-zero exit status, never a traceback."""
import re
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agents.llm.base import LLMConfigError
from agents.llm.replay import CassetteMissError
from lifecycle.errors import DomainError, NotPermitted
from lifecycle.management import python_shown
from lifecycle.models import ActionPreauthorization, Membership, Organization, Project, Requirement
from lifecycle.services.approvals import APPROVE_DEPLOYMENT
from lifecycle.services.artifacts import content_json, latest
from lifecycle.services.autonomous import deployment_approve_at_terminal, deployment_hold
from lifecycle.services.development import workspace_for
from lifecycle.services.intake import requirement_submit
from lifecycle.states import ReviewKind, Role, StepState

SAMPLE_BRIEF = Path(settings.BASE_DIR) / "agents/cassettes/sample_brief.md"
TITLE_CHARS = 80
SENTENCE_END = re.compile(r"(?<=[.!?])\s")
# A step that failed so stops the run for a reason the user fixes outside it (the provider or its cassette).
CONFIG_ERRORS = tuple(f"{cls.__name__}: " for cls in (CassetteMissError, LLMConfigError))
BRIEF_HELP = (
    "a UTF-8 text file holding the brief: what you want built, in plain words. A first line '# Title' names it "
    "(optional: otherwise the title is the brief's first sentence). Default: the bundled sample, "
    "agents/cassettes/sample_brief.md. Without ANTHROPIC_API_KEY the replay provider answers only briefs its "
    "cassette recorded (AITEAM_REPLAY_CASSETTE; the bundled one recorded the sample)."
)


def brief_from_text(text: str) -> tuple[str, str]:
    """(title, brief) of a brief file's text: a first line '# Title' is the title and the rest the brief;
    without one, the whole text is the brief and its first sentence, trimmed, the title."""
    text = text.strip()
    first, _, rest = text.partition("\n")
    if first.startswith("#"):
        body = rest.strip()
        return first.lstrip("#").strip() or title_of(body), body
    return title_of(text), text


def title_of(brief: str) -> str:
    """The brief's first sentence (of its first line), at most TITLE_CHARS, cut at a word."""
    sentence = SENTENCE_END.split(brief.partition("\n")[0], maxsplit=1)[0].strip().rstrip(".").strip()
    if len(sentence) <= TITLE_CHARS:
        return sentence
    return sentence[:TITLE_CHARS - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"


class Command(BaseCommand):
    help = ("Submit a brief (the bundled sample by default) on this configuration and print the requirement, "
            "its stories, plan, code, test runs, transitions and delivery.")

    def add_arguments(self, parser):
        parser.add_argument("--brief", type=Path, default=SAMPLE_BRIEF, metavar="FILE", help=BRIEF_HELP)
        parser.add_argument("--approve-deployment", action="store_true", help=(
            "approve the deployment gate yourself, as the demo user at this terminal, when its pre-authorization "
            "leaves it to a person (it does for any change that adds a CI workflow, so for every run); without it the "
            "run stops at ready_to_deploy with the task open in the review inbox"))

    def handle(self, *args, brief, approve_deployment=False, **options):
        raw = _read(brief)
        if not raw.strip():
            raise CommandError(f"the brief file {brief} is empty: write what you want built in it, in plain words")
        title, text = brief_from_text(raw)
        if not text:
            raise CommandError(f"the brief file {brief} holds only a title: write what you want built below it")
        if not settings.CELERY_TASK_ALWAYS_EAGER:
            self.stdout.write("Celery is not eager: steps run on your workers; this command only submits.")
        if not settings.AITEAM_AUTONOMOUS:
            self.stdout.write("Autonomous mode is off: the stories wait for a reviewer in the admin.")
        user = self._demo_user()
        try:
            requirement = requirement_submit(user=user, brief=text, title=title, via="cli")
        except (DomainError, NotPermitted) as exc:
            raise CommandError(f"{brief}: {exc}") from None
        req = Requirement.objects.get(pk=requirement.pk)
        failed = _failed_step(req)
        if failed is not None and failed.error.startswith(CONFIG_ERRORS):
            raise CommandError(failed.error.partition(": ")[2])  # its message says what to do
        if approve_deployment:
            self._approve_deployment(req, user)
        self._report(Requirement.objects.get(pk=req.pk))

    def _approve_deployment(self, req: Requirement, user) -> None:
        """The operator's own decision on a deployment left open, printed with the reason it was."""
        if held := deployment_approve_at_terminal(req, user, command="aiteam_demo"):
            self.stdout.write(f"\nDeployment approval waits for a person ({held}): approving it as {user.username}, "
                              "the operator at this terminal (--approve-deployment).")

    def _demo_user(self):
        org, _ = Organization.objects.get_or_create(slug="demo", defaults={"name": "Demo Org"})
        # The demo project pre-authorizes deployments; its runs still add a CI workflow, which holds the gate
        project, _ = Project.objects.get_or_create(organization=org, slug="default", defaults={"name": "Sample project"})
        ActionPreauthorization.objects.get_or_create(project=project, action=APPROVE_DEPLOYMENT)
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
            failed = _failed_step(req)
            why = f": step {failed.key}#{failed.attempt} failed: {failed.error}" if failed else ""
            waiting = req.review_tasks.pending().filter(kind=ReviewKind.DEPLOYMENT_APPROVAL).first()
            if waiting and not why:
                why = (f": the deployment waits for a person ({deployment_hold(waiting)}); approve task {waiting.pk} in "
                       "the admin's review inbox or over the API, or run again with --approve-deployment")
            raise CommandError(f"demo did not reach deployed (state {req.state}){why}")

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
        out(f"\nTry it: D=$(mktemp -d) && git clone -q -b {result['branch']} {result['remote_url']} \"$D\" && "
            f"PYTHONPATH=\"$D\" {python_shown()} -m pytest -q \"$D\"")

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


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CommandError(f"no brief file {path}: give --brief a text file holding the brief") from None
    except UnicodeDecodeError:
        raise CommandError(f"the brief file {path} is not UTF-8 text: save it as UTF-8") from None
    except OSError as exc:
        raise CommandError(f"cannot read the brief file {path}: {exc.strerror or exc}") from None


def _failed_step(req: Requirement):
    return req.steps.filter(state=StepState.FAILED).order_by("id").first()
