"""Writes sample.json, the bundled replay cassette (hand-authored answers in the shape the model returns).

Each interaction says what it was recorded for (`recorded_for`, agents/llm/replay.py): the brief, for the
Product Owner and the Business Analyst (the sample brief as aiteam_demo submits it, and the vague brief of the
clarification tests); for the later roles, the earlier answer their request carries. So the cassette answers
these runs and refuses any other brief at its first model call.

Run: python agents/cassettes/make_sample.py
"""
import json
from pathlib import Path

HERE = Path(__file__).parent
SAMPLE_BRIEF = (HERE / "sample_brief.md").read_text(encoding="utf-8").partition("\n")[2].strip()  # below its title
VAGUE_BRIEF = "Build something cool for our users, something cool that people love."
SAMPLE, VAGUE = {"brief": SAMPLE_BRIEF}, {"brief": VAGUE_BRIEF}

po_clear = {
  "verdict": "clear",
  "reasoning": "The brief names the user (a reader), the operations (add, mark read, list), the data, one uniqueness rule and the delivery form (library + CLI). Nothing essential is missing.",
  "summary": "A Python library with a command-line interface that lets a reader keep a reading list: add books, mark them read with a finish date, and list unread or read books, with no entry ever lost.",
  "objectives": [
    "Add a book with a required title and author and an optional ISBN",
    "Refuse a second book with an ISBN already on the list",
    "Mark a book as read, recording the date it was finished",
    "List the books still to read and the books already read",
    "Persist the list so entries survive restarts"
  ],
  "out_of_scope": ["A web or mobile front end", "Sharing lists between readers", "Book metadata lookup from online catalogues"],
  "assumptions": ["One reader per list file", "Storage is a local JSON file", "Dates are ISO 8601 calendar dates"],
  "constraints": ["Python 3.11+, standard library only", "Command-line interface"],
  "success_metrics": ["A list of 500 books loads and lists in under one second", "No entry is lost across 1,000 add/mark operations"],
  "clarifying_questions": []
}
po_vague = {
  "verdict": "too_vague",
  "reasoning": "The brief does not say who will use the product or what it must do; any build would be a guess.",
  "clarifying_questions": ["Who are the users of this product?", "What is the one task they must be able to do on day one?", "How will we know it works (a measurable outcome)?"]
}
po_after_answer = dict(po_clear, summary="A to-do list for a small team, as a Python library with a CLI: add tasks, complete them, list open and done tasks.",
  objectives=["Add a task with a title", "Mark a task done", "List open and done tasks"],
  reasoning="The stakeholder's answers name the users (a small team), the day-one task (track to-dos) and the measure.")
def story(title, as_a, want, so, ac, pri, pts):
    return dict(title=title, as_a=as_a, i_want=want, so_that=so, acceptance_criteria=ac, priority=pri, story_points=pts)
ba1 = {"reasoning": "Four stories cover the five objectives; persistence is part of each story's criteria.",
  "stories": [
    story("Add a book", "reader", "to add a book with title, author and optional ISBN", "I can keep track of what I want to read",
      ["Given an empty list, when I add 'Dune' by 'Frank Herbert', then the list holds one unread book with that title and author",
       "Adding a book without a title or without an author is refused with a message naming the missing field",
       "A book added in one run is listed in the next run"], "must", 3),
    story("Refuse duplicate ISBNs", "reader", "the list to refuse a book whose ISBN is already on it", "my list has no duplicates",
      ["Given a book with ISBN 9780441013593 on the list, adding another book with that ISBN is refused and the list is unchanged",
       "Books without an ISBN are never treated as duplicates of each other"], "must", 2),
    story("Mark a book as read", "reader", "to mark a book as read with the date I finished it", "I remember when I read it",
      ["Marking an unread book as read with date 2026-11-20 stores that date",
       "Marking a book that is not on the list fails with a clear message",
       "A date that is not a valid ISO 8601 date is refused"], "must", 2),
    story("List unread and read books", "reader", "to list the books still to read or already read", "I can choose what to read next",
      ["'list --unread' shows only unread books, in the order they were added",
       "'list --read' shows read books with their finish dates, most recent first",
       "An empty list prints 'No books.' and exits with status 0"], "should", 3)]}
ba2 = {"reasoning": "Reworked after feedback: added an export story and made the listing criteria state the output format.",
  "stories": ba1["stories"][:3] + [
    story("List unread and read books", "reader", "to list the books still to read or already read", "I can choose what to read next",
      ["'list --unread' prints one line per book as 'title — author', in the order added",
       "'list --read' prints 'title — author (finished YYYY-MM-DD)', most recent first",
       "An empty list prints 'No books.' and exits with status 0"], "should", 3),
    story("Export the list", "reader", "to export my list as CSV", "I can keep a backup",
      ["'export books.csv' writes one row per book with title, author, isbn, read_on",
       "Exporting an empty list writes only the header row"], "could", 2)]}
ba_todo = {"reasoning": "Three stories for the three objectives.", "stories": [
    story("Add a task", "team member", "to add a task with a title", "the team sees what is to be done", ["Adding a task with a title lists it as open", "A task without a title is refused"], "must", 2),
    story("Complete a task", "team member", "to mark a task done", "the team sees progress", ["Marking an open task done moves it to the done list"], "must", 1),
    story("List tasks", "team member", "to list open and done tasks", "I know what is left", ["'list' shows open tasks first, then done tasks"], "should", 2)]}
def usage(i, o, cr=0):
    return {"input_tokens": i, "output_tokens": o, "cache_read_tokens": cr, "cache_creation_tokens": 0}
c = {"interactions": [
  {"role": "product_owner", "recorded_for": SAMPLE, "match": [], "tool_input": po_clear, "model": "claude-sonnet-5-5", "usage": usage(1480, 610), "latency_ms": 6200},
  {"role": "product_owner", "recorded_for": VAGUE, "match": ["something cool"], "tool_input": po_vague, "model": "claude-sonnet-5-5", "usage": usage(1210, 180), "latency_ms": 2100},
  {"role": "product_owner", "recorded_for": VAGUE, "match": ["something cool", "small team"], "tool_input": po_after_answer, "model": "claude-sonnet-5-5", "usage": usage(1390, 420, 1024), "latency_ms": 4300},
  {"role": "business_analyst", "recorded_for": SAMPLE, "match": [], "tool_input": ba1, "model": "claude-sonnet-5-5", "usage": usage(1920, 1150), "latency_ms": 9800},
  {"role": "business_analyst", "recorded_for": SAMPLE, "match": ['"round": 2'], "tool_input": ba2, "model": "claude-sonnet-5-5", "usage": usage(2310, 1320, 1024), "latency_ms": 10400},
  {"role": "business_analyst", "recorded_for": VAGUE, "match": ["small team"], "tool_input": ba_todo, "model": "claude-sonnet-5-5", "usage": usage(1500, 700), "latency_ms": 7000},
]}


# --- design and implementation: the spec, its review, the plan, three tasks, a fix, a code review ---
PROJECT = HERE / "sample_project"
DUPLICATE_CHECK = """        if book.isbn and any(other.isbn == book.isbn for other in books):
            raise DuplicateIsbn(f"ISBN {book.isbn} is already on the list")
"""


def source(path, drop=""):
    text = (PROJECT / path).read_text()
    assert drop in text
    return {"path": path, "content": text.replace(drop, "")}


spec = {
    "reasoning": "Three small components behind one JSON file keep the library testable without a terminal; the CLI is a thin shell over the store.",
    "summary": "A standard-library Python package `readinglist`: a Book record with validation, a Store that keeps the list in one JSON file (atomic rewrite), and an argparse CLI (`python -m readinglist add|read|list`).",
    "components": [
        {"name": "models", "responsibility": "The Book record: required title and author, optional normalised ISBN, optional finish date; ISO 8601 date parsing."},
        {"name": "store", "responsibility": "Load and save the list as JSON with an atomic rewrite; add (refusing duplicate ISBNs), mark read, list unread and read."},
        {"name": "cli", "responsibility": "Parse commands, call the store, print results, exit 1 with a message on user errors."},
    ],
    "data_models": [{"name": "Book", "fields": ["title: str", "author: str", "isbn: str | None", "read_on: date | None"]}],
    "interfaces": [
        {"name": "Book", "signature": "Book(title: str, author: str, isbn: str | None = None, read_on: date | None = None)", "description": "raises InvalidBook"},
        {"name": "parse_date", "signature": "parse_date(text: str) -> date", "description": "raises InvalidBook"},
        {"name": "Store", "signature": "Store(path: Path); add(book) -> Book; mark_read(title, on: date) -> Book; unread() -> list[Book]; read() -> list[Book]", "description": "add raises DuplicateIsbn; mark_read raises UnknownBook; read() is most recent first"},
        {"name": "main", "signature": "main(argv: list[str] | None = None, path: Path = DEFAULT_PATH) -> int", "description": "exit status 0 or 1"},
    ],
    "tech_stack": ["Python 3.11 standard library", "pytest"],
    "requirement_coverage": {"FR-1": ["models", "store"], "FR-2": ["store"], "FR-3": ["models", "store"], "FR-4": ["store", "cli"]},
    "adrs": [
        {"title": "Store the list in one JSON file", "context": "A few hundred books, one reader, no entry may be lost.",
         "decision": "Keep the whole list in one JSON file and rewrite it atomically (write a temporary file, then os.replace).",
         "consequences": "Simple and durable; every write rewrites the file, which is fine at this size.",
         "alternatives": ["SQLite", "one file per book"]},
        {"title": "argparse for the command line", "context": "The constraints allow the standard library only.",
         "decision": "Use argparse subcommands add, read and list.", "consequences": "No dependency; help text for free.",
         "alternatives": ["click", "typer"]},
    ],
}
design_ok = {"verdict": "approve", "reasoning": "Every functional requirement maps to a component; the interfaces are concrete and testable.", "notes": []}
plan = {"reasoning": "Models and store can be written side by side against the interfaces; the CLI needs both.", "tasks": [
    {"key": "T1", "title": "Book model and validation", "story_refs": [1, 3], "files": ["readinglist/__init__.py", "readinglist/models.py", "tests/test_models.py"], "depends_on": [], "definition_of_done": "Book validates title and author, normalises ISBN, round-trips through a dict; parse_date accepts only ISO dates; tests pass."},
    {"key": "T2", "title": "JSON store", "story_refs": [1, 2, 3, 4], "files": ["readinglist/store.py", "tests/test_store.py"], "depends_on": [], "definition_of_done": "add, mark_read, unread and read work across instances; duplicate ISBNs are refused; tests pass."},
    {"key": "T3", "title": "Command-line interface", "story_refs": [4], "files": ["readinglist/cli.py", "readinglist/__main__.py", "tests/test_cli.py"], "depends_on": ["T1", "T2"], "definition_of_done": "add, read and list commands print the agreed lines; user errors exit 1 with a message; tests pass."},
]}
t1 = {"reasoning": "The record validates in __post_init__ so no invalid Book can exist.", "files": [source("readinglist/__init__.py"), source("readinglist/models.py"), source("tests/test_models.py")]}
t2_buggy = {"reasoning": "The store rewrites the JSON file atomically on every change.", "files": [source("readinglist/store.py", drop=DUPLICATE_CHECK), source("tests/test_store.py")]}
t3 = {"reasoning": "A thin argparse shell; user errors become exit status 1.", "files": [source("readinglist/cli.py"), source("readinglist/__main__.py"), source("tests/test_cli.py")]}
fix = {"reasoning": "test_a_second_book_with_the_same_isbn_is_refused failed: Store.add never checked the ISBN. Added the check before saving.", "files": [source("readinglist/store.py")]}
code_ok = {"verdict": "approve", "reasoning": "The change implements every acceptance criterion with tests; writes are atomic; errors are reported clearly.", "notes": []}


def task_of(key):
    """What an engineer's request carries of the plan's task `key`."""
    return {"definition_of_done": next(t for t in plan["tasks"] if t["key"] == key)["definition_of_done"]}


AFTER_PO = {"summary": po_clear["summary"]}  # the clarified requirement, in the architect's request
AFTER_SPEC = {"summary": spec["summary"]}  # the spec, in the design review's, plan's, code review's and DevOps'
STORE_INTERFACE = {"signature": next(i for i in spec["interfaces"] if i["name"] == "Store")["signature"]}  # QC's
AFTER_T2 = {"path": "readinglist/store.py"}  # the engineer's files, in the fix's request
c["interactions"] += [
    {"role": "tech_architect", "tool": "submit_technical_spec_output", "recorded_for": AFTER_PO, "match": [], "tool_input": spec, "model": "claude-sonnet-5-5", "usage": usage(3100, 1900), "latency_ms": 14200},
    {"role": "tech_lead", "tool": "submit_review_verdict", "recorded_for": AFTER_SPEC, "match": [], "tool_input": design_ok, "model": "claude-haiku-5-5", "usage": usage(3900, 160, 2048), "latency_ms": 2300},
    {"role": "tech_lead", "tool": "submit_implementation_plan_output", "recorded_for": AFTER_SPEC, "match": [], "tool_input": plan, "model": "claude-haiku-5-5", "usage": usage(2600, 620, 2048), "latency_ms": 3900},
    {"role": "senior_engineer", "tool": "submit_engineer_output", "recorded_for": task_of("T1"), "match": ['"key": "T1"'], "tool_input": t1, "model": "claude-sonnet-5-5", "usage": usage(2900, 1400), "latency_ms": 11800},
    {"role": "senior_engineer", "tool": "submit_engineer_output", "recorded_for": task_of("T2"), "match": ['"key": "T2"'], "tool_input": t2_buggy, "model": "claude-sonnet-5-5", "usage": usage(2900, 1500), "latency_ms": 12400},
    {"role": "senior_engineer", "tool": "submit_engineer_output", "recorded_for": task_of("T3"), "match": ['"key": "T3"'], "tool_input": t3, "model": "claude-sonnet-5-5", "usage": usage(4800, 1600, 2048), "latency_ms": 13100},
    {"role": "senior_engineer", "tool": "submit_engineer_output", "recorded_for": AFTER_T2, "match": ["Make the failing tests pass"], "tool_input": fix, "model": "claude-sonnet-5-5", "usage": usage(7200, 900, 4096), "latency_ms": 8600},
    {"role": "tech_lead", "tool": "submit_code_review_verdict", "recorded_for": AFTER_SPEC, "match": [], "tool_input": code_ok, "model": "claude-haiku-5-5", "usage": usage(6800, 240, 4096), "latency_ms": 3100},
]


# --- quality gate and delivery: QC's acceptance tests, DevOps' CI workflow, runbook and rollback ---
ACCEPTANCE = "tests/acceptance/test_acceptance.py"
qc = {"reasoning": "One test per criterion through the CLI, which is how a reader observes the behaviour; storage is checked in the JSON file itself.",
      "files": [source(ACCEPTANCE)],
      "coverage": {
          "AC-1.1": ["test_adding_dune_lists_one_unread_book"], "AC-1.2": ["test_a_book_without_title_or_author_is_refused_naming_the_field"],
          "AC-1.3": ["test_a_book_added_in_one_run_is_listed_in_the_next"], "AC-2.1": ["test_a_duplicate_isbn_is_refused_and_the_list_is_unchanged"],
          "AC-2.2": ["test_books_without_isbn_are_not_duplicates"], "AC-3.1": ["test_marking_read_stores_the_date"],
          "AC-3.2": ["test_marking_an_unknown_book_fails_clearly"], "AC-3.3": ["test_an_invalid_date_is_refused"],
          "AC-4.1": ["test_unread_books_are_listed_in_the_order_added"], "AC-4.2": ["test_read_books_show_dates_most_recent_first"],
          "AC-4.3": ["test_an_empty_list_prints_no_books_and_exits_0"]}}
CI = """name: ci
on:
  push:
  pull_request:
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v5
      - uses: actions/setup-python@v6
        with:
          python-version: "3.11"
      - name: Install test tools
        run: python -m pip install pytest
      - name: Run the tests
        run: python -m pytest -q
"""
RUNBOOK = """# Deploying readinglist

1. Check the CI run of the branch is green.
2. Merge the pull request into `main`.
3. On the target machine: `python -m pip install --upgrade git+<remote>@main` (or copy the `readinglist/` package).
4. Verify: `python -m readinglist list` prints the list (or `No books.`) and exits 0.
5. The reading list file (`~/.readinglist.json`, or `READINGLIST_FILE`) is left untouched by an upgrade.
"""
ROLLBACK = """# Rolling back readinglist

1. Reinstall the previous release: `python -m pip install --force-reinstall git+<remote>@<previous tag>`.
2. The data file format is unchanged by this release, so no data migration is needed.
3. Verify with `python -m readinglist list`; if the data file was damaged, restore the copy you took before step 1.
"""
devops = {"reasoning": "A single job on the Python the spec names, installing only pytest, running the project's test command.",
          "ci_workflow": CI, "runbook": RUNBOOK, "rollback": ROLLBACK}
c["interactions"] += [
    {"role": "qc_engineer", "tool": "submit_qc_output", "recorded_for": STORE_INTERFACE, "match": [], "tool_input": qc, "model": "claude-sonnet-5-5", "usage": usage(3300, 1800), "latency_ms": 12900},
    {"role": "devops_engineer", "tool": "submit_dev_ops_output", "recorded_for": AFTER_SPEC, "match": [], "tool_input": devops, "model": "claude-sonnet-5-5", "usage": usage(1900, 700), "latency_ms": 6100},
]
(HERE / "sample.json").write_text(json.dumps(c, indent=2, ensure_ascii=False) + "\n")
