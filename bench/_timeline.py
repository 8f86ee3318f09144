"""Where a requirement's end-to-end time goes along its critical chain, from the rows a run leaves.

Each link of the chain (a step, or parallel steps of which the one that ends last counts) splits into:
hand-off (the previous link's end → this step's row; the apply's commit, the next step's scheduling),
queue (row → claimed: a broker hop, or waiting for a free worker slot), model (recorded model latency, or
the sandbox run's own duration), and work (claimed → finished, less the model: context, validation, apply).
Head is the first transition → the first step's row; tail is the last step's end → the last transition.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

PARTS = ("head", "hand_off", "queue", "model", "work", "tail")


@dataclass
class Breakdown:
    parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    links: list[tuple[str, float, float, float, float]] = field(default_factory=list)  # key, hand-off, queue, model, work

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] += seconds


def chain_steps(req, chain: list[str]) -> list:
    """The step of each link (the last to finish among parallel keys); a key seen twice takes its next attempt."""
    seen: dict[str, int] = {}
    links = []
    for link in chain:
        candidates = []
        for key in link.split("|"):
            seen[key] = seen.get(key, 0) + 1
            step = req.steps.filter(key=key).order_by("attempt")[seen[key] - 1:seen[key]].first()
            if step is not None:
                candidates.append(step)
        links.append(max(candidates, key=lambda s: s.finished_at))
    return links


def model_seconds(step) -> float:
    calls = list(step.llm_calls.values_list("latency_ms", flat=True))
    if calls:
        return sum(calls) / 1000
    report = step.artifacts.filter(kind="test_report").first()
    return report.metadata.get("duration_s", 0) if report else 0.0


def breakdown(req, chain: list[str]) -> Breakdown:
    out = Breakdown()
    first = req.transitions.order_by("created_at").first().created_at
    last = req.transitions.order_by("-created_at").first().created_at
    previous_end = None
    for step in chain_steps(req, chain):
        hand_off = max(0.0, (step.enqueued_at - (previous_end or first)).total_seconds())
        out.add("head" if previous_end is None else "hand_off", hand_off)
        queued = max(0.0, (step.started_at - max(step.enqueued_at, previous_end or step.enqueued_at)).total_seconds())
        model = model_seconds(step)
        out.add("queue", queued)
        out.add("model", model)
        work = (step.finished_at - step.started_at).total_seconds() - model
        out.add("work", work)
        out.links.append((step.key, hand_off, queued, model, work))
        previous_end = step.finished_at
    out.add("tail", (last - previous_end).total_seconds())
    return out


def print_breakdowns(reqs, chain: list[str], *, detail: bool = False) -> None:
    """Median seconds of each part over the requirements, and the links that waited longest in a queue."""
    rows = [breakdown(req, chain) for req in reqs]
    print("critical chain, median s over requirements: " + ", ".join(
        f"{part} {statistics.median(r.parts[part] for r in rows):.2f}" for part in PARTS))
    if detail:
        print("  link                 hand-off  queue  model   work   (median s)")
        for i, (key, *_) in enumerate(rows[0].links):
            cells = [statistics.median(r.links[i][j] for r in rows) for j in range(1, 5)]
            print(f"  {key:20s} " + " ".join(f"{c:6.3f}" for c in cells))
    waits = sorted((queued, key) for r in rows for key, _, queued, _, _ in r.links)[-5:]
    print("longest queue waits on the chain: " + ", ".join(f"{key} {wait:.2f} s" for wait, key in reversed(waits)))
