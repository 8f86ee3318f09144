"""Which statements each test sends to the database, and which tests the PostgreSQL lane leaves to SQLite.

`make test-unit-pg` runs the database tests again on PostgreSQL, to run every statement the ORM builds there as
production does. A test whose every statement *shape* (its SQL with the values taken out) a test that stays in the
lane also sends adds time, not statements: such a test is listed in `tests/sqlite_only.txt`, and the lane deselects
it (it still runs on SQLite, in `make test-unit`). Only tests that take at least `--min-seconds` (0.5) there are
candidates: the quick ones are mostly about one query each, and leaving them saves little. A test that sent nothing
the recorder saw (its queries in another thread or process) is kept, and so is one that counts its queries (a
count can differ between the engines where the shapes do not)

Renew the list after changing what the expensive tests query (a test renamed or added simply runs on PostgreSQL):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/aiteam .venv/bin/python -m tests.query_shapes

It runs the lane with the recorder on (`AITEAM_QUERY_SHAPES`: a folder for one JSON file per xdist worker), then
chooses greedily, the most expensive test first: a test is left out when each of its shapes is still sent by a
test that stays.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

LIST = Path(__file__).with_name("sqlite_only.txt")
ENV = "AITEAM_QUERY_SHAPES"  # while it is set, the lane records and leaves nothing out
_HEADER = """\
# Left out of `make test-unit-pg` (they run on SQLite in `make test-unit`): each statement shape these tests send is
# sent on PostgreSQL by a test that stays in that lane. Written by `python -m tests.query_shapes` (see its docstring
# for when to renew it): {summary}
"""

_SPACE = re.compile(r"\s+")
_STRING = re.compile(r"'(?:[^']|'')*'")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")
_NAMES = re.compile(r'"(?:s\d+_x\d+|_django_curs_[\w]+)"')  # savepoints and server-side cursors: a name per use
_LIST = re.compile(r"\((?:\s*%s\s*,)+\s*%s\s*\)")  # IN (%s, %s, …) or one row of VALUES
_ROWS = re.compile(r"(\(%s\))(?:\s*,\s*\(%s\))+")  # VALUES (%s), (%s), … after the rows are folded


def shape(sql: str) -> str:
    """The statement without its values: literals, the length of IN lists and of multi-row VALUES, and the
    names Django makes up per use (savepoints, cursors) do not make a statement new."""
    text = _NAMES.sub('"name"', _SPACE.sub(" ", sql).strip())
    text = _NUMBER.sub("0", _STRING.sub("'…'", text))
    return _ROWS.sub(r"\1", _LIST.sub("(%s)", text))


_COUNTING = ("django_assert_num_queries", "django_assert_max_num_queries", "CaptureQueriesContext")


def counts_queries(fixturenames, function) -> bool:
    """The test asserts how many statements something sends (pytest-django's fixtures, Django's context)."""
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        source = ""
    return any(name in fixturenames or name in source for name in _COUNTING)


class Recorder:
    """Each test's shapes (through Django's execute_wrapper) and seconds (pytest's reports), written per worker."""

    def __init__(self, folder: str):
        self.folder = Path(folder)
        self.shapes: dict[str, set[str]] = {}
        self.seconds: Counter[str] = Counter()
        self.counting: set[str] = set()

    def wrapper(self, nodeid: str, *, counts: bool = False):
        seen = self.shapes.setdefault(nodeid, set())
        if counts:
            self.counting.add(nodeid)

        def record(execute, sql, params, many, context):
            seen.add(shape(sql))
            return execute(sql, params, many, context)
        return record

    def timed(self, report) -> None:
        self.seconds[report.nodeid] += report.duration

    def write(self, worker: str) -> None:
        if not self.shapes:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        tests = {node: {"seconds": round(self.seconds[node], 3), "shapes": sorted(shapes),
                        "counts": node in self.counting} for node, shapes in self.shapes.items()}
        (self.folder / f"{worker}.json").write_text(json.dumps(tests))


def left_out(tests: dict[str, dict], min_seconds: float) -> list[str]:
    """The tests whose every shape a test that stays also sends, the most expensive considered first."""
    senders = Counter(s for test in tests.values() for s in set(test["shapes"]))
    dropped = []
    candidates = [node for node, test in tests.items()
                  if test["shapes"] and not test.get("counts") and test["seconds"] >= min_seconds]
    for node in sorted(candidates, key=lambda n: (-tests[n]["seconds"], n)):
        shapes = set(tests[node]["shapes"])
        if all(senders[s] >= 2 for s in shapes):
            senders.subtract(shapes)
            dropped.append(node)
    return sorted(dropped)


def read_list(path: Path = LIST) -> set[str]:
    if not path.exists():
        return set()
    return {line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="recorded", help="a folder an earlier recording wrote (skip the run)")
    parser.add_argument("--min-seconds", type=float, default=0.5)
    parser.add_argument("--workers", default=os.environ.get("TEST_WORKERS", "4"))
    options = parser.parse_args(argv)
    folder = options.recorded or tempfile.mkdtemp(prefix="aiteam-query-shapes-")
    if not options.recorded:
        if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
            parser.error("set DATABASE_URL to a PostgreSQL server (the lane's test databases are made beside it)")
        env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL", "ANTHROPIC_API_KEY")}
        env |= {ENV: folder, "DJANGO_SECRET_KEY": env.get("DJANGO_SECRET_KEY", "aiteam-tests-only-not-a-secret")}
        command = [sys.executable, "-m", "pytest", "tests/unit", "-q", "-n", options.workers, "--dist", "loadgroup",
                   "--database-tests-only", "-p", "no:cacheprovider"]
        if subprocess.run(command, env=env).returncode != 0:
            print("the lane failed: the list is left as it was", file=sys.stderr)
            return 1
    tests: dict[str, dict] = {}
    for part in Path(folder).glob("*.json"):
        tests |= json.loads(part.read_text())
    dropped = left_out(tests, options.min_seconds)
    kept_seconds = sum(t["seconds"] for n, t in tests.items() if n not in dropped)
    all_shapes = {s for t in tests.values() for s in t["shapes"]}
    summary = (f"{len(dropped)} of {len(tests)} tests, {sum(tests[n]['seconds'] for n in dropped):.0f} of "
               f"{sum(t['seconds'] for t in tests.values()):.0f} test-seconds; {len(all_shapes)} shapes, all still sent")
    LIST.write_text(_HEADER.format(summary=summary) + "".join(f"{node}\n" for node in dropped))
    print(f"{LIST}: {summary}; the lane keeps {kept_seconds:.0f} test-seconds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
