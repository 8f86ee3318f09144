"""The repository index and each role's context on a real large repository available offline: the installed Django
package's source, made a git repository of one commit.

The index (agents/repo, no database): indexing (cold, and loaded from the cache by commit SHA), the repository map
for a few token budgets with and without a ticket, lexical search, and whether the file each ticket is about
comes out on top.

The roles (lifecycle, bench/_repo_roles.py): the Django source as a project's repository on a scratch SQLite
database, each ticket a requirement run through clarification, localization, the plan and the engineer's edits by
the real runner on a replayed answer (no network, no model). For each ticket: the localization step's time, split
into building the Tech Lead's context (the index from its cache, search and map within the budget) and checking
an answer against the index; then the tokens of each role's context as the real builders make it
(lifecycle/contexts.py: localize, plan, engineer, code review, QC) against the role's budget
(agents/repo/budget.py), with the files and definitions that went in (LLMCall.context_sources).

    python bench/repo_context.py [--cold 2] [--repeats 20] [--budgets 1000,4000,8000] [--no-roles]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agents.repo import estimate_tokens, index_repository, repo_map, search  # noqa: E402
from bench import _repo_roles as roles  # noqa: E402
from bench._report import print_machine  # noqa: E402

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@localhost", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "PATH": "/usr/bin:/bin"}
# (ticket, the file a fix would change): the check that the ranking points where an engineer would look.
TICKETS = [
    ("Paginator.get_page() should return the last page when the number is out of range", "django/core/paginator.py"),
    ("The CSRF cookie is not rotated after login; see rotate_token", "django/middleware/csrf.py"),
    ("QuerySet.bulk_create with ignore_conflicts=True does not set primary keys", "django/db/models/query.py"),
    ("slugify drops characters when allow_unicode is set", "django/utils/text.py"),
]
SYMBOLS = {"django/core/paginator.py": "Paginator.get_page", "django/middleware/csrf.py": "rotate_token",
           "django/db/models/query.py": "QuerySet.bulk_create", "django/utils/text.py": "slugify"}  # what a fix changes
LOCALIZE_BUDGET = 4000


def main() -> None:
    args = parse()
    print_machine("Django", "bm25s", "numpy")
    with tempfile.TemporaryDirectory() as tmp:
        repo = django_repository(Path(tmp))
        index, cold = time_cold(repo, Path(tmp), args.cold)
        warm = [timed(lambda: index_repository(repo, Path(tmp) / "cache"))[1] for _ in range(args.repeats)]
        cache_mb = sum(p.stat().st_size for p in (Path(tmp) / "cache").iterdir()) / 1e6
        print(f"\nrepository: {len(index.files) + len(index.skipped):,} files in the commit, {len(index.files):,} "
              f"indexed ({sum(f.python for f in index.files):,} Python), {len(index.skipped):,} left out "
              f"({summary_of(index.skipped)}), {len(index.symbols):,} definitions")
        print(f"index cold: {ms(cold)}; from the cache: {ms(warm)}; cache file {cache_mb:.1f} MB")
        maps(index, args)
        searches(index, args)
        localization(index, args)
        if args.roles:
            role_contexts(repo, Path(tmp), index, args)


def django_repository(tmp: Path) -> Path:
    repo = tmp / "django-src"
    shutil.copytree(Path(django.__file__).parent, repo / "django", ignore=shutil.ignore_patterns("__pycache__"))
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "django source"]):
        subprocess.run(["git", "-C", str(repo), *command], env=GIT_ENV, check=True)
    return repo


def time_cold(repo: Path, tmp: Path, runs: int):
    seconds, index = [], None
    for run in range(runs):
        index, took = timed(lambda run=run: index_repository(repo, tmp / f"cold-{run}"))
        seconds.append(took)
    shutil.copytree(tmp / "cold-0", tmp / "cache")
    return index, seconds


def maps(index, args) -> None:
    print("\n| budget | ticket | build ms (median) | tokens | lines | files | rank of the ticket's file |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    index.searcher  # noqa: B018 -- built once here so the map timings below do not include it
    for budget in args.budgets:
        for ticket, expected in [("", None), *TICKETS[:2]]:
            view, took = median_of(lambda b=budget, t=ticket: repo_map(index, b, ticket=t), args.repeats // 4 or 1)
            assert view.tokens == estimate_tokens(view.text) <= budget
            files = len({e.path for e in view.entries})
            label = f"{ticket[:28]}…" if ticket else "(none)"
            print(f"| {budget:,} | {label} | {took * 1000:,.0f} | {view.tokens:,} | {len(view.text.splitlines()):,} | "
                  f"{files:,} | {place_of(view, expected) if expected else ''} |")


def searches(index, args) -> None:
    first = timed(lambda: type(index.searcher)(index.symbols))[1]
    print(f"\nsearch index build (BM25 over {len(index.symbols):,} definitions): {first * 1000:,.0f} ms")
    print("| query | median ms | top hit | hits in the ticket's file (of 10) |")
    print("| --- | ---: | --- | ---: |")
    for ticket, expected in TICKETS:
        hits, took = median_of(lambda t=ticket: search(index, t, limit=10), args.repeats)
        inside = sum(h.path == expected for h in hits)
        top = f"{hits[0].path}:{hits[0].qualname}" if hits else "-"
        print(f"| {ticket[:40]}… | {took * 1000:.1f} | {top} | {inside} |")


def localization(index, args) -> None:
    """The mechanical half of a localization step: search with the ticket, then a map steered by the ticket and by
    the files of the top three hits (what the lifecycle would pass as focus_paths)."""
    print(f"\n| ticket | its file in a {LOCALIZE_BUDGET:,}-token map: ticket alone | + top-3 search files | "
          "search + map ms (median) |")
    print("| --- | ---: | ---: | ---: |")
    for ticket, expected in TICKETS:
        alone = place_of(repo_map(index, LOCALIZE_BUDGET, ticket=ticket), expected)
        view, took = median_of(lambda t=ticket: steered_map(index, t), args.repeats // 4 or 1)
        print(f"| {ticket[:40]}… | {alone} | {place_of(view, expected)} | {took * 1000:,.0f} |")


def steered_map(index, ticket: str):
    focus = list(dict.fromkeys(hit.path for hit in search(index, ticket, limit=10)))[:3]
    return repo_map(index, LOCALIZE_BUDGET, ticket=ticket, focus_paths=focus)


def role_contexts(repo: Path, tmp: Path, index, args) -> None:
    """Each ticket through the lifecycle's repository steps, and each role's context on it (bench/_repo_roles.py)."""
    script = {ticket: scripted(repo, index, ticket, path) for ticket, path in TICKETS}
    cassette = tmp / "cassette.json"
    roles.write_cassette(cassette, [answer for answers in script.values() for answer in answers])
    roles.configure(tmp / "var", cassette)
    project, user = roles.project_on(repo, GIT_ENV)
    runs = args.repeats // 4 or 1
    located, built = [], []
    for ticket, path in TICKETS:
        req = roles.ticket_requirement(project, user, ticket)
        roles.run_step(req, "po_clarify")
        localized = localize(req, path, roles.tool_input(script[ticket], "submit_localization_output"), runs)
        located.append((ticket, localized))
        localizer = roles.with_call(roles.Built("tech_lead", "localize", localized.context), req, "tl_localize")
        built.append((ticket, [localizer, *roles.each_role(req, runs)]))
    print_localization(located)
    print_roles(built)


def scripted(repo: Path, index, ticket: str, path: str) -> list[dict]:
    """The replayed answers for one ticket: its file and the definition a fix changes, and the best search hit
    outside that file to read."""
    symbol = SYMBOLS[path]
    (line,) = [s.line for s in index.symbols_by_path[path] if s.qualname == symbol]
    read = next((h.path for h in search(index, ticket, limit=10) if h.path != path), None)
    return roles.answers(ticket, path, symbol, read, (repo / path).read_text(encoding="utf-8"), line)


def localize(req, path: str, answer: dict, runs: int) -> roles.Localized:
    """The tl_localize step through the runner, then its two halves apart: the context (the index from its cache,
    search and map within the budget) and the check of the replayed answer against the index."""
    from agents.schemas import LocalizationOutput
    from lifecycle import contexts, repo_contexts

    step_ms = roles.run_step(req, "tl_localize") * 1000
    context, build_ms = roles.median_ms(lambda: contexts.localize_context(req.pk), runs)
    with repo_contexts.checkout(req.pk) as workspace:
        head = workspace.head()
    _, index_ms = roles.median_ms(lambda: repo_contexts.repository_index(req, workspace, head), runs)
    _, check_ms = roles.median_ms(lambda: LocalizationOutput.model_validate(answer, context=context), runs)
    wrong = {**answer, "files": [{**answer["files"][0], "path": path.replace("/", "/_", 1)}, *answer["files"][1:]]}
    repair, repair_ms = roles.median_ms(lambda: roles.refusal(LocalizationOutput, wrong, context), runs)
    return roles.Localized(step_ms, build_ms, index_ms, check_ms, repair_ms, repair, context)


def print_localization(located: list) -> None:
    print("\nlocalization (tl_localize through the runner, the answer replayed; then its halves apart, medians):")
    print("| ticket | step ms | context ms | of which the index from its cache | answer check ms | wrong path "
          "refused ms | context tokens / tech_lead budget |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for ticket, done in located:
        print(f"| {ticket[:40]}… | {done.step_ms:,.0f} | {done.build_ms:,.0f} | {done.index_ms:,.0f} | "
              f"{done.check_ms:.2f} | {done.repair_ms:.1f} | {roles.against_budget(done.context, 'tech_lead')} |")
    print(f"a wrong path goes back as: {located[-1][1].repair.splitlines()[1][:200]}")


def print_roles(built: list) -> None:
    print("\neach role's context (tokens of its JSON as the budgets count them; files and definitions as "
          "LLMCall.context_sources records them):")
    print("| ticket | role: step | tokens / budget | request sent | sources | how the files went in | build ms |")
    print("| --- | --- | ---: | ---: | --- | --- | ---: |")
    for ticket, contexts in built:
        for row in contexts:
            head = f"| {ticket[:28]}… | {row.role}: {row.step} |"
            if row.error:
                print(f"{head} **not built**: {row.error} | | | | |")
                continue
            took = "(above)" if row.build_ms is None else f"{row.build_ms:,.0f}"
            sent = "" if row.sent is None else f"{row.sent:,}"
            print(f"{head} {roles.against_budget(row.context, row.role)} | {sent} | {roles.sources_of(row.context)} | "
                  f"{roles.shown_of(row.context)} | {took} |")


def place_of(view, path: str) -> str:
    files = list(dict.fromkeys(e.path for e in view.entries))
    return str(files.index(path) + 1) if path in files else "not shown"


def timed(call):
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def median_of(call, runs: int):
    results = [timed(call) for _ in range(runs)]
    return results[-1][0], statistics.median(t for _, t in results)


def ms(values: list[float]) -> str:
    low, mid, high = (v * 1000 for v in (min(values), statistics.median(values), max(values)))
    return f"median {mid:,.0f} ms (min {low:,.0f}, max {high:,.0f}, n={len(values)})"


def summary_of(skipped) -> str:
    counts: dict[str, int] = {}
    for item in skipped:
        counts[item.reason] = counts.get(item.reason, 0) + 1
    return ", ".join(f"{n:,} {reason}" for reason, n in sorted(counts.items())) or "none"


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=2, help="cold indexing runs, each into an empty cache")
    parser.add_argument("--repeats", type=int, default=20, help="runs of each timed search and cache load")
    parser.add_argument("--budgets", type=lambda s: [int(b) for b in s.split(",")], default=[1000, 4000, 8000])
    parser.add_argument("--no-roles", dest="roles", action="store_false",
                        help="the index only: no database, no role contexts")
    return parser.parse_args()


if __name__ == "__main__":
    main()
