"""Run an evaluation suite (docs/evals.md) and export a run.

    .venv/bin/python manage.py aiteam_eval run --suite NAME [--bundle VERSION] [--organization SLUG] [--live]
    .venv/bin/python manage.py aiteam_eval export RUN_ID

`run` takes every case of evals/NAME through the whole team, in an evaluation project of its own whose gates the
evaluation policy decides, answered by each case's cassette (offline, the default) or by the configured model
(--live); it prints a line as each case starts and ends, then a table, and stores the run (EvalRun, EvalCase).
`--organization` runs an organization's candidate for it: the run, and its cases' projects holding the candidate, are
readable by that organization's members only, who may then cite it in a proposal.
`export` prints a stored run as JSON."""
from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.core.serializers.json import DjangoJSONEncoder

from lifecycle.errors import DomainError
from lifecycle.evals.report import cache_line, run_json, table
from lifecycle.evals.running import eval_run_cases, eval_run_start
from lifecycle.evals.suites import SuiteError, load_suite
from lifecycle.management import python_shown
from lifecycle.models import EvalRun, Organization, PromptBundle
from lifecycle.models.evals import is_evaluation_organization


class Command(BaseCommand):
    help = "Run an evaluation suite through the whole team and store its measures, or export a run as JSON."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        run = actions.add_parser("run", help="run every case of a suite")
        run.add_argument("--suite", required=True, help="a folder under evals/ (e.g. offline), or a path to one")
        run.add_argument("--bundle", metavar="VERSION", help=(
            "the prompt bundle to run with: its sha256, or a prefix of it (default: the prompt files as they are)"))
        run.add_argument("--organization", metavar="SLUG", help=(
            "whose versions these are: the run is that organization's alone to read and cite (default: the "
            "operators', readable by the evaluation organization's members)"))
        run.add_argument("--live", action="store_true",
                         help="answer with the configured model (ANTHROPIC_API_KEY) instead of each case's cassette")
        export = actions.add_parser("export", help="print a stored run as JSON")
        export.add_argument("run_id", type=int, metavar="RUN_ID")

    def handle(self, *args, action, **options):
        if action == "export":
            self._export(options["run_id"])
        else:
            self._run(options["suite"], options.get("bundle"), options.get("live", False), options.get("organization"))

    def _run(self, suite: str, bundle_version: str | None, live: bool, organization: str | None) -> None:
        if live and settings.AITEAM_LLM_PROVIDER == "replay":
            raise CommandError("--live needs a model: set ANTHROPIC_API_KEY (or run offline, without --live)")
        try:
            cases = load_suite(suite)
        except SuiteError as exc:
            raise CommandError(str(exc)) from None
        try:
            run = eval_run_start(suite=suite, bundle=_bundle(bundle_version), live=live,
                                 organization=_organization(organization))
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Evaluation run {run.pk}: suite {run.suite}, {len(cases)} cases, "
                          f"{'live (' + run.provider + ')' if live else 'offline (cassettes)'}")
        rows = eval_run_cases(run, cases, progress=self.stdout.write)
        self.stdout.write("\n" + table(rows))
        self.stdout.write(cache_line(rows))
        self.stdout.write(f"\nbundle {run.bundle_id or '-'}; export: {python_shown()} manage.py aiteam_eval export {run.pk}")
        broke = [row.name for row in rows if row.broke]
        if broke:  # the machinery failed, not the team: a script running suites must see it
            raise CommandError(f"{len(broke)} of {len(rows)} case(s) broke ({', '.join(broke)}): each row's error "
                               "(or hidden_error) says why, and the log has the traceback")

    def _export(self, run_id: int) -> None:
        run = EvalRun.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no evaluation run {run_id}: `aiteam_eval run` prints the id of each run it stores")
        self.stdout.write(json.dumps(run_json(run), indent=2, cls=DjangoJSONEncoder))


def _organization(slug: str | None) -> Organization | None:
    if not slug:
        return None
    found = Organization.objects.filter(slug=slug).first()
    if found is None or is_evaluation_organization(found.slug):
        raise CommandError(f"--organization {slug}: no such organization (give the slug of the one proposing)")
    return found


def _bundle(version: str | None) -> PromptBundle | None:
    if not version:
        return None
    found = list(PromptBundle.objects.filter(sha256__startswith=version.lower())[:2])
    if len(found) != 1:
        raise CommandError(f"--bundle {version}: {'no' if not found else 'more than one'} prompt bundle starts so; "
                           "give more of its sha256 (a requirement's prompt bundle, shown in the admin)")
    return found[0]
