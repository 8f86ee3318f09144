"""Propose a change to a project's prompts, budget profile or playbook table, with its evidence (ADR 39).

    .venv/bin/python manage.py aiteam_promote propose --project ORG/SLUG --by USERNAME --suite NAME --expect TEXT
        (--prompt NAME=FILE [--prompt …] | --budgets FILE.json | --playbooks FILE.json) [--why TEXT] [--live]
    .venv/bin/python manage.py aiteam_promote draft --project ORG/SLUG --suite NAME [--live]
    .venv/bin/python manage.py aiteam_promote list [--project ORG/SLUG]

`propose` runs the suite with the project's current version and with the candidate, then puts the proposal to the
project's owners (its organization's admins), who decide it in the admin or over the API. `draft` is the optimizer:
it reads the meta-evaluation log for a role whose failures keep recurring and proposes a constraint in its prompt.
Nothing here makes a version current."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from lifecycle.actors import Actor
from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.evals.optimizer import draft_constraint
from lifecycle.evals.proposals import evaluate_and_propose
from lifecycle.evals.suites import SuiteError
from lifecycle.models import Project, PromotedArtifact, PromotionDecision
from lifecycle.notifications.promotions import promotion_url
from lifecycle.services.promotions import OPTIMIZER, bundle_with


class Command(BaseCommand):
    help = "Propose a change to a project's prompts, budgets or playbooks with eval runs as evidence; list them."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        propose = actions.add_parser("propose", help="run the suite with the current version and the candidate, "
                                                     "then propose the candidate to the project's owners")
        _common(propose)
        propose.add_argument("--by", required=True, metavar="USERNAME", help="the proposer, a member of the project's "
                                                                              "organization")
        what = propose.add_mutually_exclusive_group(required=True)
        what.add_argument("--prompt", action="append", metavar="NAME=FILE",
                          help="a prompt replaced by a file's text (repeat for several)")
        what.add_argument("--budgets", metavar="FILE", help="the whole budget profile, as JSON")
        what.add_argument("--playbooks", metavar="FILE", help="the whole playbook table (ticket kind → playbook), JSON")
        propose.add_argument("--expect", required=True, help="the expected effect")
        propose.add_argument("--why", default="", help="the justification in words")
        draft = actions.add_parser("draft", help="the optimizer: a constraint for a role whose failures keep recurring")
        _common(draft)
        listing = actions.add_parser("list", help="the promotions, newest first")
        listing.add_argument("--project", metavar="ORG/SLUG")

    def handle(self, *args, action, **options):
        if action == "list":
            return self._list(options.get("project"))
        project = _project(options["project"])
        try:
            if action == "propose":
                actor = Actor.human(_user(options["by"]), "cli")
                artifact, candidate = _candidate(project, options)
                expected, why = options["expect"], options["why"]
            else:
                draft = draft_constraint(project)
                if draft is None:
                    self.stdout.write("nothing to propose: no role's failures keep recurring in the meta-evaluation log")
                    return None
                artifact, candidate, expected, why = PromotedArtifact.PROMPTS, draft.bundle, draft.expected, draft.why
                actor = Actor.system(OPTIMIZER)
            decision = evaluate_and_propose(project=project, artifact=artifact, candidate=candidate,
                                            suite=options["suite"], actor=actor, expected_effect=expected,
                                            justification=why, live=options["live"], progress=self.stdout.write)
        except (DomainError, IllegalTransition, NotPermitted, SuiteError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"\npromotion {decision.pk} proposed to the owners of {project}: "
                          f"{len(decision.change)} change(s); decide at {promotion_url(decision)} "
                          f"or POST /api/v1/promotions/{decision.pk}/accept/")
        return None

    def _list(self, slug: str | None) -> None:
        rows = PromotionDecision.objects.select_related("project__organization").order_by("-created_at")
        if slug:
            rows = rows.filter(project=_project(slug))
        for row in rows[:100]:
            self.stdout.write(f"{row.pk}  {row.created_at:%Y-%m-%d %H:%M}  {row.project}  {row.artifact:<9}  "
                              f"{row.kind:<9}  {row.state:<10}  {row.current_version[:12]} → {row.candidate_version[:12]}")


def _common(parser) -> None:
    parser.add_argument("--project", required=True, metavar="ORG/SLUG")
    parser.add_argument("--suite", required=True, help="a folder under evals/ (e.g. offline), or a path to one")
    parser.add_argument("--live", action="store_true", help="both runs against the configured model")


def _project(slug: str) -> Project:
    organization, _, name = slug.partition("/")
    project = Project.objects.filter(organization__slug=organization, slug=name).first()
    if project is None:
        raise CommandError(f"--project {slug}: no such project (give ORGANIZATION/PROJECT slugs)")
    return project


def _user(username: str) -> Any:
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise CommandError(f"--by {username}: no such active user")
    return user


def _candidate(project: Project, options: dict[str, Any]) -> tuple[str, Any]:
    if options.get("prompt"):
        changed = {}
        for item in options["prompt"]:
            name, sep, path = item.partition("=")
            if not sep:
                raise CommandError(f"--prompt {item}: give NAME=FILE (NAME a file of agents/prompts without .md)")
            changed[name] = _read(path, f"--prompt {name}")
        return PromotedArtifact.PROMPTS, bundle_with(project, changed).pk
    artifact = PromotedArtifact.BUDGETS if options.get("budgets") else PromotedArtifact.PLAYBOOKS
    path = options.get("budgets") or options["playbooks"]
    try:
        return artifact, json.loads(_read(path, "--budgets" if options.get("budgets") else "--playbooks"))
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path}: not JSON ({exc})") from None


def _read(path: str, option: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{option} {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{option} {path}: not UTF-8 text (byte {exc.start}): give a UTF-8 text file") from None
