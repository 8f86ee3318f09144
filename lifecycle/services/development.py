"""Development: engineer tasks fanned out by dependency, self-tests in the sandbox, the
3-attempt rule, escalation with human guidance, and the tech lead's code review."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.delivery.rich_text import neutral
from agents.edits import named_paths
from agents.lost_tests import defined_tests, lost_tests, ran
from agents.schemas import CodeReviewVerdict, EditsOutput, EngineerOutput, SourceFile
from agents.workspace import GitError, Workspace
from lifecycle import guards, step_keys
from lifecycle.actors import Actor
from lifecycle.errors import SandboxTimedOut
from lifecycle.failure_rules import TAMPERED, Failure, Route, Source, classify
from lifecycle.models import Requirement, Step
from lifecycle.services.artifacts import NewArtifact, artifact_store, artifacts_store, content_json, latest
from lifecycle.services.failures import failure_route_record, failure_with_history
from lifecycle.services.leases import Lease, lock_for_apply, step_applying, step_finish
from lifecycle.services.outbox import emit
from lifecycle.services.repositories import repository_workspace, requirement_branch
from lifecycle.services.reviews import review_open
from lifecycle.services.scheduling import step_schedule
from lifecycle.services.transitions import transition
from lifecycle.states import ArtifactKind, ReviewKind, StepState

ENGINEER = Actor.agent("senior_engineer")
TECH_LEAD = Actor.agent("tech_lead")
SANDBOX = Actor.system("sandbox")
OUTPUT_TAIL_IN_TASK = 4000
MAX_LOST_LISTED = 50  # lost tests kept on the report and shown to the reviewer
TITLE_IN_COMMIT = 100  # characters of a task's title in its commit's one line


def workspace_for(requirement: Requirement) -> Workspace:
    """A new project's workspace (history from empty), or on an existing repository the requirement's clone of
    its mirror at the base commit it recorded: either on the branch the requirement keeps (requirement_branch)."""
    if requirement.base_sha:
        return repository_workspace(requirement)
    return Workspace(Path(settings.AITEAM_WORKSPACE_ROOT) / str(requirement.pk), requirement_branch(requirement))


def schedule_ready_tasks(requirement: Requirement, *, attempt: int) -> None:
    """Queue every plan task whose dependencies are done; once all are done, queue the self-tests."""
    done = {
        key.partition(":")[2]
        for key in Step.objects.filter(requirement=requirement, key__startswith=f"{step_keys.ENGINEER}:", attempt=attempt,
                                       state=StepState.DONE).values_list("key", flat=True)
    }
    tasks = list(requirement.plan_tasks.all())
    if all(task.key in done for task in tasks):
        step_schedule(requirement_id=requirement.pk, key=step_keys.SELF_TEST, attempt=attempt)
        return
    for task in tasks:
        if task.key not in done and set(task.depends_on) <= done:
            step_schedule(requirement_id=requirement.pk, key=f"{step_keys.ENGINEER}:{task.key}", attempt=attempt)


def engineer_apply(*, lease: Lease, output: EngineerOutput | EditsOutput) -> None:
    """Write one task's files (or apply its edits, on a repository), commit them as that task's attempt, then fan
    out what is now ready."""
    with transaction.atomic():
        step, requirement = lock_for_apply(lease)  # serializes commits to the workspace
        task = requirement.plan_tasks.get(key=lease.task_key)
        commit, files = code_commit(requirement, output, task_commit_message(task.key, task.title, lease.attempt))
        store_code(requirement, files, step, lease.attempt, commit)
        emit(requirement, "TaskImplemented", {"task": task.key, "attempt": lease.attempt, "commit": commit,
                                              **_deleted(output)})
        step_finish(step)
        schedule_ready_tasks(requirement, attempt=lease.attempt)


def task_commit_message(key: str, title: str, attempt: int) -> str:
    """`T1: <title> (attempt 1)`: our words around the planner's title, which is model output steered by the ticket,
    made one neutral line (no trailer, closing keyword's reference or mention can form in the pushed history)."""
    return f"{key}: {neutral(title, TITLE_IN_COMMIT)} (attempt {attempt})"


def fix_apply(*, lease: Lease, output: EngineerOutput | EditsOutput) -> None:
    """A whole-workspace fix for attempt n (edits, on a repository): commit it, then run the self-tests again."""
    with step_applying(lease) as (step, requirement):
        touched = set(named_paths(output)) if isinstance(output, EditsOutput) else {f.path for f in output.files}
        keys = [t.key for t in requirement.plan_tasks.all() if touched & set(t.files)] or ["fix"]
        commit, files = code_commit(requirement, output, f"{','.join(keys)}: fix (attempt {lease.attempt})")
        store_code(requirement, files, step, lease.attempt, commit)
        emit(requirement, "FixCommitted", {"attempt": lease.attempt, "commit": commit, **_deleted(output)})
        step_schedule(requirement_id=requirement.pk, key=step_keys.SELF_TEST, attempt=lease.attempt)


def self_test_apply(*, lease: Lease, output: dict[str, Any]) -> None:
    """Record the sandbox's report; passing → in_review, failing → the failure classifier decides (a fix, or
    a human). A run the sandbox stopped at its time limit is an infrastructure failure: raised, retried."""
    ensure_not_timed_out(output)
    with transaction.atomic():
        step, requirement = lock_for_apply(lease)
        workspace = workspace_for(requirement)
        # the commit the sandbox ran (workspace_aligned copied the one recorded), not whatever git's HEAD now says
        head, lost = requirement.workspace_head or workspace.head(), _lost_tests(requirement, output)
        summary = f"{output['passed']} passed, {output['failed']} failed, {output['errors']} errors"
        artifacts_store(requirement, [
            NewArtifact(ArtifactKind.TEST_REPORT, "self_test", output, summary, step=step, role=SANDBOX.role, metadata={
                "attempt": lease.attempt, "commit": head, "ok": output["ok"], "passed": output["passed"],
                "failed": output["failed"], "errors": output["errors"], "duration_s": output["duration_s"],
                "lost_tests": lost}),
            NewArtifact(ArtifactKind.DIFF_SUMMARY, "workspace", workspace.diff_summary(head=head or "HEAD"),
                        f"attempt {lease.attempt} at {head[:10]}", {"attempt": lease.attempt, "commit": head}, step,
                        SANDBOX.role),
        ])
        if lost:  # the code review must answer for them (CodeReviewVerdict._lost_tests_answered)
            emit(requirement, "TestsLost", {"attempt": lease.attempt, "lost": lost})
        step_finish(step)
        if output["ok"]:
            transition(requirement, "submit_for_review", actor=SANDBOX, metadata={"attempt": lease.attempt})
            emit(requirement, "SelfTestsPassed", {"attempt": lease.attempt})
            _start_code_review(requirement)
        else:
            emit(requirement, "SelfTestsFailed", {"attempt": lease.attempt, "failing": output["failing_tests"][:50]})
            _route_failed_self_test(requirement, step, output)


def _lost_tests(requirement: Requirement, report: dict[str, Any]) -> list[str]:
    """Tests that the plan's tasks wrote, or that the previous self-test ran, and that this run did not: one
    task (or a fix) emptying another's test file is flagged, not delivered unnoticed (docs/adr/0026)."""
    previous = latest(requirement, ArtifactKind.TEST_REPORT, "self_test")
    before = content_json(previous) if previous else None
    written = requirement.artifacts.filter(kind=ArtifactKind.TEST_FILE, step__key__startswith=f"{step_keys.ENGINEER}:")
    known = defined_tests(SourceFile(path=a.name, content=a.blob.content) for a in written.select_related("blob"))
    return lost_tests(known | (ran(before) or set() if before else set()), report, before)[:MAX_LOST_LISTED]


def code_review_apply(*, lease: Lease, output: CodeReviewVerdict) -> None:
    with transaction.atomic():
        step, requirement = lock_for_apply(lease)
        artifact_store(requirement, kind=ArtifactKind.REVIEW, name="code_review", content=output.model_dump(),
                       summary=f"{output.verdict}: {output.reasoning}", metadata={"round": lease.attempt,
                       "verdict": output.verdict}, step=step, role=TECH_LEAD.role)
        step_finish(step)
        if output.verdict == "approve":
            code_review_pass(requirement, actor=TECH_LEAD)
            return
        route = _route_code_review(requirement, step, output, round=lease.attempt)
        if route == Route.ARCHITECT:
            code_review_to_architect(requirement, actor=TECH_LEAD, notes=output.notes, spec_issues=output.spec_issues)
        elif route == Route.ENGINEER:
            code_review_fail(requirement, actor=TECH_LEAD, notes=output.notes + output.spec_issues)
        else:
            review_open(
                requirement, kind=ReviewKind.CODE_REVIEW, round=lease.attempt,
                question=f"The tech lead requested changes {lease.attempt} times. Approve the code as it is, request "
                "changes with your guidance (one more engineer attempt), or reject to cancel.",
                reasoning=output.reasoning, context={"notes": output.notes, "spec_issues": output.spec_issues},
                resume_target=step_keys.FIX,
            )


def code_review_pass(requirement: Requirement, *, actor: Actor) -> None:
    transition(requirement, "pass_code_review", actor=actor, metadata={"round": requirement.code_review_round})
    emit(requirement, "CodeReviewPassed", {"round": requirement.code_review_round})


def code_review_fail(requirement: Requirement, *, actor: Actor, notes: list[str]) -> None:
    transition(requirement, "fail_code_review", actor=actor, metadata={"notes": notes})
    emit(requirement, "CodeReviewFailed", {"round": requirement.code_review_round, "notes": notes})
    next_attempt(requirement)


def code_review_to_architect(requirement: Requirement, *, actor: Actor, notes: list[str], spec_issues: list[str]) -> None:
    """The review found the spec inconsistent: back to development, where the architect revises the spec
    (a new spec version) before the engineer's fix; see design.architect_apply."""
    transition(requirement, "fail_code_review", actor=actor, metadata={"notes": notes, "spec_issues": spec_issues})
    emit(requirement, "CodeReviewFailed", {"round": requirement.code_review_round, "notes": notes,
                                           "spec_issues": spec_issues})
    step_schedule(requirement_id=requirement.pk, key=step_keys.ARCHITECT, attempt=requirement.design_round + 1)


def resume_with_guidance(requirement: Requirement, *, actor: Actor, guidance: str) -> None:
    """A human answered an escalation: development resumes with another engineer attempt."""
    transition(requirement, "resume_development", actor=actor, metadata={"guidance": guidance})
    next_attempt(requirement)


def next_attempt(requirement: Requirement) -> None:
    requirement.dev_attempts += 1
    requirement.save(update_fields=["dev_attempts"])
    step_schedule(requirement_id=requirement.pk, key=step_keys.FIX, attempt=requirement.dev_attempts)


def _route_code_review(requirement: Requirement, step: Step, verdict: CodeReviewVerdict, *, round: int) -> Route:
    """Spec issues → the architect; notes on the code → the engineer; the last allowed round → a human.
    Without a spec (a bug-fix playbook) a spec issue is one more note for the engineer."""
    has_spec = requirement.artifacts.filter(kind=ArtifactKind.TECHNICAL_SPEC).exists()
    spec_issues = tuple(verdict.spec_issues) if has_spec else ()
    failure = failure_with_history(requirement=requirement, failure=Failure(
        source=Source.CODE_REVIEW, step=step_keys.CODE_REVIEW, review_notes=tuple(verdict.notes) + (() if has_spec else
        tuple(verdict.spec_issues)), spec_issues=spec_issues,
        loop_exhausted=round >= settings.AITEAM_MAX_CODE_REVIEW_ROUNDS))
    routing = classify(failure)
    actions = {Route.ARCHITECT: f"spec revision (design round {requirement.design_round + 1}) before the next fix",
               Route.ENGINEER: f"fix attempt {requirement.dev_attempts + 1} with the review notes"}
    failure_route_record(requirement=requirement, failure=failure, routing=routing, step=step,
                         summary=f"code review round {round}: {verdict.reasoning}",
                         action=actions.get(routing.route, "a code_review task asks a human"))
    return routing.route


def _start_code_review(requirement: Requirement) -> None:
    requirement.code_review_round += 1
    requirement.save(update_fields=["code_review_round"])
    step_schedule(requirement_id=requirement.pk, key=step_keys.CODE_REVIEW, attempt=requirement.code_review_round)


def ensure_not_timed_out(report: dict[str, Any]) -> None:
    if report.get("timed_out"):
        raise SandboxTimedOut(f"the sandbox stopped the test run at its limit ({report.get('killed_reason') or 'timeout'}"
                              f" after {report.get('duration_s', 0)} s; AITEAM_SANDBOX_TIMEOUT_S raises it); output "
                              f"tail: {report.get('output_tail', '')[-500:]}")


def _route_failed_self_test(requirement: Requirement, step: Step, report: dict[str, Any]) -> None:
    """Failing tests → the engineer's next attempt; the same failure again after a fix, or the third failed
    attempt → a human (escalation). The route is recorded first: the escalate guard reads it."""
    failing = report["failing_tests"][:50]
    failure = failure_with_history(requirement=requirement, failure=Failure(
        source=Source.SELF_TEST, step=step_keys.SELF_TEST, tests_failed=True, failing_tests=tuple(failing),
        loop_exhausted=not guards.attempts_left(requirement), tampered=tuple(report.get("tampered") or ())))
    routing = classify(failure)
    to_engineer = routing.route == Route.ENGINEER
    failure_route_record(
        requirement=requirement, failure=failure, routing=routing, step=step,
        summary=f"self-tests of attempt {requirement.dev_attempts}: {report['failed']} failed, {report['errors']} errors",
        action=f"fix attempt {requirement.dev_attempts + 1} scheduled" if to_engineer else "escalated to a human")
    if to_engineer:
        transition(requirement, "retry_development", actor=SANDBOX,
                   metadata={"attempt": requirement.dev_attempts + 1, "failing": failing})
        next_attempt(requirement)
    else:
        development_escalate(requirement, report=report, reason=routing.first)


def development_escalate(requirement: Requirement, *, report: dict[str, Any], reason: str) -> None:
    """in_development → escalated: an escalation task shows the failing tests and the code, and asks for guidance."""
    failing = report["failing_tests"][:50]
    transition(requirement, "escalate", actor=SANDBOX, metadata={"attempts": requirement.dev_attempts, "rule": reason})
    code = list(requirement.artifacts.filter(kind__in=[ArtifactKind.SOURCE_FILE, ArtifactKind.TEST_FILE],
                                             metadata__attempt=requirement.dev_attempts).values_list("name", "id"))
    why = ("failed the same way after a fix" if reason == "repeated_after_fix"
           else f"reported a pass the code under test forged ({'; '.join(report.get('tampered', []))})"
           if reason == TAMPERED else f"failed {requirement.dev_attempts} times")
    review_open(
        requirement, kind=ReviewKind.ESCALATION,
        question=f"The tests {why}. Give the engineer guidance (request changes with feedback) to try again, or "
        "reject to cancel the requirement.",
        reasoning="; ".join(failing[:10]),
        context={"attempts": requirement.dev_attempts, "failing_tests": failing, "routing_rule": reason,
                 "tampered": report.get("tampered", []),
                 "output_tail": report.get("output_tail", "")[-OUTPUT_TAIL_IN_TASK:],
                 "code": [{"path": path, "artifact": str(pk)} for path, pk in code]},
        resume_target=step_keys.FIX,
    )


def workspace_commit(requirement: Requirement, files: list[SourceFile], message: str) -> str:
    """Write the files and commit them, in the caller's transaction, which holds the requirement's lock; returns
    the commit. The workspace is first put back at the commit the database records (git work a failed apply left
    is undone), and the new commit is recorded with the transaction: if it rolls back, so will the workspace, at
    the next apply or read."""
    workspace = workspace_for(requirement)
    workspace.align(requirement.workspace_head)
    workspace.ensure()  # after align, which may re-create the repository, so that a first apply makes it once
    workspace.write(files)
    requirement.workspace_head = workspace.commit(message)
    requirement.save(update_fields=["workspace_head"])
    return requirement.workspace_head


class EditsNoLongerApply(GitError):
    """The edits were checked against the files as they stood when the model answered, and the workspace has
    moved since (a parallel task committed): a retry runs the step again on the files as they stand now."""


def code_commit(requirement: Requirement, output: EngineerOutput | EditsOutput, message: str
                ) -> tuple[str, list[SourceFile]]:
    """Commit an engineer's answer under the caller's lock: whole files, or (on a repository) search/replace edits
    applied all or none. Returns the commit and the files it wrote, whole, to store as artifacts."""
    if not isinstance(output, EditsOutput):
        return workspace_commit(requirement, output.files, message), output.files
    workspace = workspace_for(requirement)
    workspace.align(requirement.workspace_head)  # a repository's workspace: align ensures it is whole first
    applied = workspace.apply(output)
    if not applied.ok:
        raise EditsNoLongerApply(f"the edits no longer apply to the workspace at {workspace.head()[:12]}: "
                                 f"{applied.repair_request()[:2000]}")
    requirement.workspace_head = workspace.commit(message)
    requirement.save(update_fields=["workspace_head"])
    # the repository's own files, whole, for the record: not model output, and larger than a new file may be
    files = [SourceFile.model_construct(path=path, content=data.decode("utf-8")) for path, data in applied.changed.items()]
    return requirement.workspace_head, files


def _deleted(output: EngineerOutput | EditsOutput) -> dict:
    return {"deleted": list(output.deleted)} if isinstance(output, EditsOutput) and output.deleted else {}


def workspace_aligned(requirement_id) -> Workspace:
    """The workspace at the commit the database records, for a step that reads it (the sandbox, delivery): aligned
    under the requirement's lock, so no apply is writing it meanwhile. Those steps run when no apply of the
    requirement is due; an agent's context reads with workspace_files instead."""
    with transaction.atomic():
        requirement = Requirement.objects.select_for_update().get(pk=requirement_id)
        workspace = workspace_for(requirement)
        workspace.align(requirement.workspace_head)
    return workspace


def workspace_files(requirement_id) -> list[SourceFile]:
    """The workspace's files at the commit the database records, aligned and read under the requirement's lock:
    parallel engineer tasks apply while others build their contexts."""
    with transaction.atomic():  # the lock workspace_aligned takes is held until this block ends
        return workspace_aligned(requirement_id).files()


def store_code(requirement: Requirement, files: list[SourceFile], step: Step, attempt: int, commit: str) -> None:
    artifacts_store(requirement, [NewArtifact(
        ArtifactKind.TEST_FILE if _is_test(file.path) else ArtifactKind.SOURCE_FILE, file.path, file.content,
        f"{len(file.content.splitlines())} lines", {"attempt": attempt, "commit": commit}, step, ENGINEER.role)
        for file in files])


def _is_test(path: str) -> bool:
    return path.startswith("tests/") or Path(path).name.startswith("test_")
