"""Writes the bundled ticket cassette (cassette.json), the ticket's title (title.txt) and body (body.md) from the
corpus's SAMPLE entry (tests/ticket_corpus/textkit.py): the answers a person wrote for that ticket, in the shape
each role returns (docs/role-schemas.md), each pinned to the run it answers (docs/cassettes.md).

Pins, by what each request carries of this run: triage the ticket's body, the clarification the brief (the same
body), the localization, the plan and DevOps the clarified summary (each by its own tool), the engineer the plan
task's definition of done, QC the first acceptance criterion, the code review the edited file's path plus the
regression test the fix adds (so it answers only after the fix is in).

Run from the repository's root: python agents/cassettes/sample_ticket/make_cassette.py
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.ticket_corpus import SAMPLE  # noqa: E402 - the corpus is found from the repository's root

MODEL = "claude-sonnet-5-5"
DEVOPS = {
    "reasoning": "One job on the Python the plan names, installing pytest and running the repository's tests.",
    "ci_workflow": "name: ci\non:\n  push:\n  pull_request:\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - uses: actions/checkout@v5\n      - uses: actions/setup-python@v6\n        with:\n"
                   "          python-version: \"3.11\"\n      - name: Install test tools\n"
                   "        run: python -m pip install pytest\n      - name: Run the tests\n"
                   "        run: python -m pytest -q\n",
    "runbook": "# Releasing textkit\n\n1. Check the pull request's CI run is green.\n2. Merge it into `main`.\n"
               "3. Tag the merge commit and publish the package as usual.\n",
    "rollback": "# Rolling back textkit\n\n1. Revert the merge commit on `main`.\n2. Publish the previous tag again.\n",
}


def usage(tokens_in: int, tokens_out: int) -> dict[str, int]:
    return {"input_tokens": tokens_in, "output_tokens": tokens_out, "cache_read_tokens": 0, "cache_creation_tokens": 0}


def interactions() -> list[dict]:
    answers = SAMPLE.answers()
    task = answers["plan"]["tasks"][0]
    regression = "test_runs_of_spaces_and_dashes_become_one_dash"  # the fix's new test: in the review's files
    assert regression in json.dumps(answers["engineer"])
    rows = [
        ("product_owner", "submit_triage_output", {"body": SAMPLE.body}, [], answers["triage"], (900, 90)),
        ("product_owner", "submit_bug_ticket_output", {"brief": SAMPLE.body}, [], answers["clarify"], (1400, 420)),
        ("tech_lead", "submit_localization_output", {"summary": SAMPLE.summary}, [], answers["localize"],
         (3900, 260)),
        ("tech_lead", "submit_ticket_plan_output", {"summary": SAMPLE.summary}, [], answers["plan"], (2100, 380)),
        ("senior_engineer", "submit_edits_output", {"definition_of_done": task["definition_of_done"]}, [],
         answers["engineer"], (5200, 610)),
        ("tech_lead", "submit_code_review_verdict", {"path": SAMPLE.fixed_paths[0]}, [regression],
         answers["code_review"], (4800, 160)),
        ("qc_engineer", "submit_qc_output", {"criterion": SAMPLE.criteria[0]}, [], answers["qc"], (2300, 540)),
        ("devops_engineer", "submit_dev_ops_output", {"summary": SAMPLE.summary}, [], DEVOPS, (1500, 520)),
    ]
    return [{"role": role, "tool": tool, "recorded_for": pins, "match": match, "tool_input": answer, "model": MODEL,
             "usage": usage(*tokens), "latency_ms": 40 * tokens[1]}
            for role, tool, pins, match, answer, tokens in rows]


def files() -> dict[str, str]:
    """What this script writes, by name: the cassette, the ticket's title and its body."""
    cassette = json.dumps({"interactions": interactions()}, indent=2, ensure_ascii=False) + "\n"
    return {"cassette.json": cassette, "title.txt": SAMPLE.title + "\n", "body.md": SAMPLE.body + "\n"}


if __name__ == "__main__":
    for name, text in files().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"wrote {(HERE / name).relative_to(HERE.parents[2])}")
