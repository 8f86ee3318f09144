"""Per-step orchestration cost: aiteam's real step machinery against LangGraph with a Postgres checkpointer.

aiteam, machinery (the headline, like for like with LangGraph's trivial nodes): N requirements (default 60)
through bench/_machinery.py's 8 steps — each a Step row run by the real run_step task (lease, fence, inline
continuation or broker hop), reading its ~2 KB state, rotating it, and applying it in one transaction through
the real services (guarded FSM transition + audit row, outbox event with the state, step done, next scheduled) —
on a scratch PostgreSQL database, Redis (database 12) and one real Celery worker (prefork, -c 2).

aiteam, agents (for scale: what the real roles add on top of the machinery): the same N through the first 8
steps of the real chain, with the replay provider at AITEAM_REPLAY_LATENCY_MS=0 (a zero-latency fake LLM)
and AITEAM_AUTONOMOUS=true — context queries, prompt rendering, output validation, artifacts, git commits:

    po_clarify → ba_stories → architect_spec → tl_design_review → tl_plan → engineer:T1 / engineer:T2 → engineer:T3

The worker consumes only `llm,default`, so the next step (self_test, on `sandbox`) stays queued and is not
measured. The requirements run one at a time (latency); then all N are submitted at once (throughput).
Per step: the 8 Step rows of a requirement sorted by finished_at, and finish_i − finish_{i−1} with
finish_0 = the moment the brief was submitted: the wall-clock cost of a step including its broker hop.
Also per step key: run (started_at → finished_at) and hand-off (the predecessor's finished_at → started_at).

LangGraph: a StateGraph of 8 nodes in a line, each doing trivial work on a ~2 KB state, compiled with a
PostgresSaver on its own scratch database, invoked with durability="sync" (each checkpoint is written before
the next step starts). Each node records its start time in the state; a step is the interval between
consecutive node starts (the first from invoke() start, the last to invoke() return), so each of the 8
intervals holds one node and one checkpoint write.

LangGraph makes as many sequential runs as aiteam's machinery has sequential requirements, and the two take
turns in blocks of the same size (--block, default 5), so both sides of the ratio run under the same drift of
the machine's speed and each block starts after the other side's. Besides the ratio of the two medians, a
paired ratio: each block's median step over that of the LangGraph block made right after it (drift within a
run cancels out of each pair).

    .venv/bin/python bench/step_overhead.py [--requirements 60] [--block 5] [--concurrency 2]
        [--inline-window 5]  (AITEAM_STEP_INLINE_WINDOW_S for the worker; 0 sends every step through the broker)
"""
from __future__ import annotations

import argparse
import operator
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Annotated, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._report import BENCH_BROKER, percentile, print_load_after, print_machine, summary  # noqa: E402
from bench._services import scratch_database, start_worker, stop  # noqa: E402

KEYS = ["po_clarify", "ba_stories", "architect_spec", "tl_design_review", "tl_plan", "engineer:T1", "engineer:T2",
        "engineer:T3"]
LAST = "engineer:T3"
PREDECESSORS = {"po_clarify": [], "ba_stories": ["po_clarify"], "architect_spec": ["ba_stories"],
                "tl_design_review": ["architect_spec"], "tl_plan": ["tl_design_review"], "engineer:T1": ["tl_plan"],
                "engineer:T2": ["tl_plan"], "engineer:T3": ["engineer:T1", "engineer:T2"]}
NODES = 8
STOPPED = {"blocked", "escalated", "cancelled"}


def main() -> None:
    args = parse()
    began = time.monotonic()
    os.environ.pop("ANTHROPIC_API_KEY", None)
    with tempfile.TemporaryDirectory() as tmp, \
            scratch_database("aiteam_bench_step_overhead", BENCH_BROKER) as url, \
            scratch_database("aiteam_bench_step_overhead_lg", BENCH_BROKER, migrate=False) as lg_url:
        env = {"DATABASE_URL": url, "CELERY_BROKER_URL": BENCH_BROKER, "AITEAM_AUTONOMOUS": "true",
               "AITEAM_LLM_PROVIDER": "replay", "AITEAM_REPLAY_LATENCY_MS": "0",
               "AITEAM_WORKSPACE_ROOT": f"{tmp}/ws", "AITEAM_REMOTES_ROOT": f"{tmp}/remotes",
               "AITEAM_LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "aiteam.settings",
               "AITEAM_STEP_INLINE_WINDOW_S": str(args.inline_window)}
        os.environ.update(env)
        import django

        django.setup()
        import redis

        print_machine("Django", "celery", "kombu", "redis", "psycopg", "langgraph", "langgraph-checkpoint",
                      "langgraph-checkpoint-postgres", "psycopg-pool", database_url=url, broker_url=BENCH_BROKER)
        redis.Redis.from_url(BENCH_BROKER).flushdb()
        log = Path(tmp) / "worker.log"
        worker = start_worker("steps", {**env, "AITEAM_BENCH_ANNOUNCE": "1"}, args.concurrency, log,
                              queues="llm,default", wait_ready=30, app="bench._machinery")
        try:
            with LangGraphRuns(lg_url) as langgraph_runs:
                # LangGraph's sequential runs take turns with aiteam's in blocks of the same size: the machine's
                # speed drifts over minutes, and both sides of the ratio must see the same drift (module docstring)
                machinery = run_machinery(args, url, between=langgraph_runs.run_until,
                                          before=lambda: langgraph_runs.warm(args.block))
            aiteam = run_aiteam(args)
        except BaseException:
            print("--- worker log (tail) ---\n" + log.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            stop(worker)
            redis.Redis.from_url(BENCH_BROKER).flushdb()  # the queued self_test messages
            from django.db import connections

            connections.close_all()
        langgraph = run_langgraph_burst(args, lg_url) | langgraph_runs.result()
    report(args, machinery, aiteam, langgraph)
    print(f"\nbenchmark wall time: {time.monotonic() - began:.1f} s")
    print_load_after()


# --- aiteam -------------------------------------------------------------------------------------------------


def run_machinery(args, url: str, *, between, before) -> dict:
    from bench import _machinery
    from lifecycle.models import Organization, Project, Requirement

    finished = Finished(url)

    org = Organization.objects.create(slug="machinery", name="machinery")
    project = Project.objects.create(organization=org, slug="default", name="machinery")
    keys, last = _machinery.KEYS, _machinery.KEYS[-1]
    predecessors = {key: [prev] for prev, key in zip(keys, keys[1:], strict=False)} | {keys[0]: []}

    def submit_one(title: str):
        t0 = now()
        requirement = Requirement.objects.create(organization=org, project=project, title=title, brief="x" * 2048)
        _machinery.start(requirement)
        return requirement.pk, t0

    warm = [submit_one(f"warm-up {i}") for i in range(3)]
    try:
        finished.wait([rid for rid, _ in warm], args.timeout, last=last)
        before()  # the first block follows the other side's, as every later one does
        sequential = []
        for i in range(args.requirements):
            rid, t0 = submit_one(f"sequential {i}")
            finished.wait([rid], args.timeout, last=last)
            sequential.append((rid, t0))
            if len(sequential) % args.block == 0 or len(sequential) == args.requirements:
                between(len(sequential))  # as many LangGraph runs as requirements so far
        burst_start = now()
        burst = [submit_one(f"burst {i}") for i in range(args.requirements)]
        submitted = now()
        finished.wait([rid for rid, _ in burst], args.timeout * args.requirements, last=last)
    finally:
        finished.close()
    analyse_keys = {"keys": keys, "predecessors": predecessors}
    return {"warm": analyse(warm, **analyse_keys), "sequential": analyse(sequential, **analyse_keys),
            "burst": analyse(burst, **analyse_keys), "burst_start": burst_start, "burst_submitted": submitted,
            "keys": keys, "inline": inline_share(sequential, keys)}


def inline_share(runs: list, keys: list[str]) -> float:
    """The share of steps after the first that ran inline (inserted already started by the worker that ran them)."""
    from lifecycle.models import Step

    rows = Step.objects.filter(requirement_id__in=[rid for rid, _ in runs], key__in=keys[1:])
    inline = sum(1 for started, enqueued in rows.values_list("started_at", "enqueued_at") if started <= enqueued)
    return inline / max(1, rows.count())


def run_aiteam(args) -> dict:
    from django.contrib.auth import get_user_model

    from lifecycle.models import Membership, Organization, Project

    org = Organization.objects.create(slug="bench", name="bench")
    Project.objects.create(organization=org, slug="default", name="bench")
    user = get_user_model().objects.create(username="bench")
    Membership.objects.create(user=user, organization=org, role="admin")

    warm = [submit(user, "warm-up")]  # imports, connections, first git workspace: not measured
    wait_done([warm[0][0]], args.timeout)

    sequential = []
    for i in range(args.requirements):
        rid, t0 = submit(user, f"sequential {i}")
        wait_done([rid], args.timeout)
        sequential.append((rid, t0))

    burst_start = now()
    burst = [submit(user, f"burst {i}") for i in range(args.requirements)]
    submitted = now()
    wait_done([rid for rid, _ in burst], args.timeout * args.requirements)
    return {"warm": analyse(warm), "sequential": analyse(sequential), "burst": analyse(burst),
            "burst_start": burst_start, "burst_submitted": submitted, "keys": KEYS, "inline": inline_share(sequential, KEYS)}


def now() -> datetime:
    from django.utils import timezone

    return timezone.now()


def submit(user, title: str):
    from lifecycle.services.intake import requirement_submit
    from tests.flows import SAMPLE

    t0 = now()
    return requirement_submit(user=user, brief=SAMPLE, title=title).pk, t0


class Finished:
    """The machinery's requirements whose last step has committed, as the worker announces them (NOTIFY, see
    bench/_machinery.announce): the bench sleeps until then. Polling the database every 10 ms instead took CPU
    (three queries, and PostgreSQL's for them) from the 2-core machine while the worker was being measured:
    inline steps measured 7-27 % slower on the worker than in-process then, 3-10 % when polling every 50-80 ms."""

    def __init__(self, url: str) -> None:
        import psycopg

        from bench._machinery import CHANNEL

        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(f"LISTEN {CHANNEL}")
        self.seen: set[str] = set()

    def wait(self, ids: list, timeout: float, last: str) -> None:
        pending = {str(rid) for rid in ids} - self.seen
        deadline = time.monotonic() + timeout
        while pending:
            heard = False
            for note in self.conn.notifies(timeout=1.0, stop_after=len(pending)):
                heard = True
                self.seen.add(note.payload)
                pending.discard(note.payload)
            if pending and not heard:  # a second without news: a failed or stopped step ends the run here
                check_stalled([rid for rid in ids if str(rid) in pending], deadline, last)

    def close(self) -> None:
        self.conn.close()


def wait_done(ids: list, timeout: float, last: str = LAST) -> None:
    from lifecycle.models import Step

    deadline = time.monotonic() + timeout
    while Step.objects.filter(requirement_id__in=ids, key=last, state="done").count() != len(ids):
        check_stalled(ids, deadline, last)
        time.sleep(0.01)


def check_stalled(ids: list, deadline: float, last: str) -> None:
    """Exit with what went wrong when a step failed, a requirement stopped, or the deadline passed."""
    from lifecycle.models import Requirement, Step

    failed = list(Step.objects.filter(requirement_id__in=ids, state="failed").values_list("key", "error")[:3])
    stuck = list(Requirement.objects.filter(pk__in=ids, state__in=STOPPED).values_list("pk", "state")[:3])
    if failed or stuck or time.monotonic() > deadline:
        states = list(Step.objects.filter(requirement_id__in=ids).values_list("key", "state")[:40])
        sys.exit(f"aiteam run did not reach {last}: failed steps {failed}, stopped requirements {stuck}, "
                 f"steps {states}")


def ms(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds() * 1000


def analyse(runs: list, keys: list[str] = KEYS, predecessors: dict = PREDECESSORS) -> dict:
    from lifecycle.models import Step

    deltas, totals, run_ms, handoff_ms, queue_ms, last_finish, by_run = [], [], {}, {}, {}, [], []
    for rid, t0 in runs:
        rows = {s.key: s for s in Step.objects.filter(requirement_id=rid, key__in=keys)}
        if sorted(rows) != sorted(keys):
            sys.exit(f"requirement {rid}: expected the steps {keys}, found {sorted(rows)}")
        ordered = sorted(rows.values(), key=lambda s: s.finished_at)
        previous, mine = t0, []
        for step in ordered:
            mine.append(ms(previous, step.finished_at))
            previous = step.finished_at
        deltas += mine
        by_run.append(mine)
        totals.append(ms(t0, ordered[-1].finished_at))
        last_finish.append(ordered[-1].finished_at)
        for key, step in rows.items():
            before = max((rows[p].finished_at for p in predecessors[key]), default=t0)
            run_ms.setdefault(key, []).append(ms(step.started_at, step.finished_at))
            handoff_ms.setdefault(key, []).append(ms(before, step.started_at))
            queue_ms.setdefault(key, []).append(ms(step.enqueued_at, step.started_at))
    return {"deltas": deltas, "totals": totals, "run": run_ms, "handoff": handoff_ms, "queue": queue_ms,
            "last_finish": max(last_finish), "by_run": by_run}


# --- LangGraph ----------------------------------------------------------------------------------------------


class State(TypedDict):
    doc: str
    n: int
    ts: Annotated[list[float], operator.add]


def node(state: State) -> dict:
    started = time.time()
    doc = state["doc"]
    return {"doc": doc[1:] + doc[:1], "n": state["n"] + 1, "ts": [started]}  # trivial work on a ~2 KB state


def build_graph(checkpointer):
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(State)
    names = [f"step{i}" for i in range(1, NODES + 1)]
    for name in names:
        graph.add_node(name, node)
    graph.add_edge(START, names[0])
    for a, b in zip(names, names[1:], strict=False):
        graph.add_edge(a, b)
    graph.add_edge(names[-1], END)
    return graph.compile(checkpointer=checkpointer)


def durability_kwargs() -> dict:
    import inspect

    from langgraph.pregel import Pregel

    return {"durability": "sync"} if "durability" in inspect.signature(Pregel.invoke).parameters else {}


def one_run(app, thread: str, extra: dict) -> tuple[list[float], float]:
    state = {"doc": "x" * 2048, "n": 0, "ts": []}
    start = time.time()
    final = app.invoke(state, {"configurable": {"thread_id": thread}}, **extra)
    end = time.time()
    if final["n"] != NODES:
        sys.exit(f"LangGraph run {thread} ran {final['n']} nodes, not {NODES}")
    bounds = [start, *final["ts"][1:], end]
    return [(b - a) * 1000 for a, b in zip(bounds, bounds[1:], strict=False)], (end - start) * 1000


class LangGraphRuns:
    """LangGraph's sequential runs, on one PostgresSaver connection, a block at a time after each block of
    aiteam's requirements (see main)."""

    def __init__(self, url: str) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver

        self.saver_context = PostgresSaver.from_conn_string(url)
        self.extra = durability_kwargs()
        self.deltas: list[float] = []
        self.totals: list[float] = []
        self.batches: list[list[float]] = []  # per call of run_until: the step times of the runs it made

    def __enter__(self) -> LangGraphRuns:
        saver = self.saver_context.__enter__()
        saver.setup()
        self.app = build_graph(saver)
        for i in range(3):
            one_run(self.app, f"warm-{i}", self.extra)
        return self

    def __exit__(self, *exc) -> None:
        self.saver_context.__exit__(*exc)

    def warm(self, runs: int) -> None:
        """Runs not measured (before aiteam's first block)."""
        for i in range(runs):
            one_run(self.app, f"warm-block-{i}", self.extra)

    def run_until(self, runs: int) -> None:
        batch = []
        while len(self.totals) < runs:
            d, total = one_run(self.app, f"seq-{len(self.totals)}", self.extra)
            batch += d
            self.totals.append(total)
        self.deltas += batch
        self.batches.append(batch)

    def result(self) -> dict:
        return {"deltas": self.deltas, "totals": self.totals, "batches": self.batches,
                "durability": self.extra.get("durability", "default (not selectable)")}


def run_langgraph_burst(args, url: str) -> dict:
    """Throughput: N runs at once over `concurrency` threads and pooled connections (like -c 2 above)."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    extra = durability_kwargs()
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(url, min_size=args.concurrency, max_size=args.concurrency, kwargs=kwargs) as pool:
        app = build_graph(PostgresSaver(pool))
        started = time.monotonic()
        with ThreadPoolExecutor(args.concurrency) as pool_threads:
            burst = list(pool_threads.map(lambda i: one_run(app, f"burst-{i}", extra), range(args.requirements)))
        wall = time.monotonic() - started
    return {"burst_wall": wall, "burst_totals": [t for _, t in burst]}


# --- report -------------------------------------------------------------------------------------------------


def report(args, machinery: dict, aiteam: dict, lg: dict) -> None:
    print(f"\naiteam: {args.requirements} requirements one at a time, 8 steps each, 1 Celery worker "
          f"(prefork -c {args.concurrency}, queues llm,default), broker {BENCH_BROKER}, "
          f"inline window {args.inline_window:g} s")
    print("  machinery = bench/_machinery.py (trivial work, real step machinery); agents = the real roles, replay "
          "at 0 ms, autonomous")
    print(f"LangGraph: {len(lg['totals'])} runs one at a time (in turns with aiteam's machinery, blocks of "
          f"{args.block} and {args.block}) "
          f"of an 8-node StateGraph (~2 KB state), "
          f"PostgresSaver, durability={lg['durability']}")
    print()
    l_med, l_p95 = statistics.median(lg["deltas"]), percentile(lg["deltas"], 95)
    l_per = statistics.median([t / NODES for t in lg["totals"]])
    rows = [("harness", "per-step median ms", "p95 ms", "total/8 median ms", "ratio to LangGraph (median)",
             "steps run inline")]
    for name, result in ((f"aiteam machinery (Celery -c {args.concurrency})", machinery),
                         (f"aiteam agents (Celery -c {args.concurrency})", aiteam)):
        seq = result["sequential"]
        med, p95 = statistics.median(seq["deltas"]), percentile(seq["deltas"], 95)
        per = statistics.median([t / NODES for t in seq["totals"]])
        rows.append((name, f"{med:.2f}", f"{p95:.2f}", f"{per:.2f}", f"{med / l_med:.2f}x",
                     f"{result['inline']:.0%}"))
    rows.append(("LangGraph + PostgresSaver", f"{l_med:.2f}", f"{l_p95:.2f}", f"{l_per:.2f}", "1.00x", "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print(" | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    paired = paired_ratios(machinery["sequential"]["by_run"], lg["batches"], args.block)
    if paired:
        quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else [paired[0]] * 3
        print(f"aiteam machinery / LangGraph, paired (each block of {args.block} requirements' median step against "
              f"the block of LangGraph runs made right after it): median {statistics.median(paired):.2f}x, "
              f"quartiles {quartiles[0]:.2f}–{quartiles[2]:.2f}x (n={len(paired)})")
    for name, result in (("machinery", machinery), ("agents", aiteam)):
        seq = result["sequential"]
        print(f"\naiteam {name} per step (finish_i − finish_i−1, ms): {summary(seq['deltas'])}")
        print(f"aiteam {name} per requirement (submit → last step, ms): {summary(seq['totals'])}")
        print(f"warm-up requirement (not counted): {seq_line(result['warm'])}")
    print(f"LangGraph per step (ms):                           {summary(lg['deltas'])}")
    print(f"LangGraph per run (invoke → return, ms):           {summary(lg['totals'])}")

    for name, result in (("machinery", machinery), ("agents", aiteam)):
        seq = result["sequential"]
        print(f"\naiteam {name} by step key, sequential run, median ms (p95):")
        print(f"  {'step':18} {'hand-off':>16} {'of it: queued':>16} {'run':>16}")
        for key in result["keys"]:
            h, q, r = seq["handoff"][key], seq["queue"][key], seq["run"][key]
            print(f"  {key:18} {fmt(h):>16} {fmt(q):>16} {fmt(r):>16}")
    print("  hand-off = predecessor's finished_at → started_at (commit, on-commit relay, Redis or inline, claim);")
    print("  queued = Step.enqueued_at → started_at; run = started_at → finished_at (context, agent, apply).")

    n_steps = NODES * args.requirements
    print(f"\nthroughput, all {args.requirements} submitted at once:")
    for name, result in (("machinery", machinery), ("agents", aiteam)):
        burst = result["burst"]
        wall = (burst["last_finish"] - result["burst_start"]).total_seconds()
        print(f"  aiteam {name}: {n_steps} steps in {wall:.2f} s = {n_steps / wall:.1f} steps/s "
              f"({wall * 1000 / n_steps:.2f} ms/step); per requirement median "
              f"{statistics.median(burst['totals']) / 1000:.2f} s")
    print(f"  LangGraph: {n_steps} steps in {lg['burst_wall']:.2f} s = {n_steps / lg['burst_wall']:.1f} steps/s "
          f"({lg['burst_wall'] * 1000 / n_steps:.2f} ms/step), {args.concurrency} threads, pooled connections")


def paired_ratios(aiteam_runs: list[list[float]], langgraph_batches: list[list[float]], block: int) -> list[float]:
    """Per block of sequential requirements, its median step over that of the LangGraph block made right after
    it: the machine's speed drifts within minutes, and a pair a fraction of a second apart sees the same drift."""
    blocks = [[step for run in aiteam_runs[i:i + block] for step in run] for i in range(0, len(aiteam_runs), block)]
    return [statistics.median(mine) / statistics.median(theirs)
            for mine, theirs in zip(blocks, langgraph_batches, strict=True)]


def seq_line(result: dict) -> str:
    return f"{result['totals'][0]:.0f} ms for 8 steps"


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({percentile(values, 95):.1f})"


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requirements", type=int, default=60)
    parser.add_argument("--block", type=int, default=5,
                        help="requirements, then as many LangGraph runs, in turn (both sides' blocks the same size)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=30, help="seconds one requirement may take")
    parser.add_argument("--inline-window", type=float, default=5.0,
                        help="AITEAM_STEP_INLINE_WINDOW_S for the worker (0: every step through the broker)")
    args = parser.parse_args()
    if args.requirements < 1 or args.block < 1:
        parser.error("--requirements and --block must be at least 1")
    return args


if __name__ == "__main__":
    main()
