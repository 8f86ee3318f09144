"""Replay a finished or failed requirement from its recordings and compare the replay with it.

Eager (the embedded default) the replay runs inside this command; with a broker it runs on
the workers and the command waits for it to come to rest. Exit status 1 on any difference.
"""
import argparse
import time
import uuid

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lifecycle.errors import DomainError, IllegalTransition, NotPermitted
from lifecycle.models import Replay, Requirement
from lifecycle.replay.compare import describe
from lifecycle.replay.runs import replay_compare as compare_now
from lifecycle.replay.runs import replay_settled, replay_start

POLL_S = 0.5


class Command(BaseCommand):
    help = "Re-run a finished or failed requirement from its recorded model calls, sandbox reports and decisions."

    def add_arguments(self, parser):
        parser.add_argument("requirement_id", type=_requirement_id,
                            help="the id (a UUID) of the finished or failed requirement to replay, as the admin "
                                 "and GET /api/v1/requirements/ show it")
        parser.add_argument("--timeout", type=_seconds, default=600.0,
                            help="seconds to wait for the workers (when Celery is not eager); default 600")

    def handle(self, *args, requirement_id, timeout, **options):
        try:
            replay = replay_start(source_id=requirement_id, via="cli")
        except Requirement.DoesNotExist:
            raise CommandError(f"no requirement {requirement_id}: give the id of one the admin or "
                               "GET /api/v1/requirements/ lists") from None
        except (IllegalTransition, DomainError, NotPermitted) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"replaying {requirement_id} as {replay.pk}")
        if not settings.CELERY_TASK_ALWAYS_EAGER:
            self._wait(replay, timeout)
        run = compare_now(replay)
        self._report(run)
        if run.verdict != Replay.Verdict.MATCHED:
            raise CommandError(f"replay {replay.pk} {run.verdict}: it does not reproduce {requirement_id}")

    def _wait(self, replay: Requirement, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not replay_settled(replay):
            if time.monotonic() > deadline:
                self.stdout.write(f"the replay has not come to rest after {timeout:.0f}s; comparing what there is")
                return
            time.sleep(POLL_S)

    def _report(self, run: Replay) -> None:
        out, result = self.stdout.write, run.comparison
        transitions, artifacts = result["transitions"], result["artifacts"]
        out(f"\nsource {result['source']} ({result['source_state']}) → replay {result['replay']} "
            f"({result['replay_state']})")
        out(f"transitions: source {len(transitions['source'])}, replay {len(transitions['replay'])}, "
            f"{'identical' if transitions['equal'] else 'DIFFERENT'}")
        for subject, event, before, after in transitions["replay"]:
            out(f"  {subject:<30} {event:<18} {before or '-':>22} → {after}")
        out(f"artifacts: source {len(artifacts['source'])}, replay {len(artifacts['replay'])}, "
            f"{'identical hashes' if artifacts['equal'] else 'DIFFERENT'}")
        for kind, name, version, sha in artifacts["replay"]:
            out(f"  {sha[:16]} {kind:<20} {name} v{version}")
        requests = result["requests"]
        out(f"model calls replayed: {requests['compared']}; steps asked differently than recorded: "
            f"{', '.join(requests['differing_steps']) or 'none'}")
        for line in describe(result):
            out(f"DIFFERS: {line}")
        out(f"verdict: {run.verdict}")


def _requirement_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a requirement id: give its UUID, as the admin and "
                                         "GET /api/v1/requirements/ show it") from None


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return seconds
