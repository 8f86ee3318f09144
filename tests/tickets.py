"""Scripted answers for a bug_fix run: a word counter that crashed on empty text."""
from tests.answers import answer

TICKET = ("Bug: wordcount.count_words crashes on empty input. count_words('') raises IndexError instead of "
          "returning 0, and whitespace-only text fails the same way. Expected: 0 words for empty or blank text.")
CRITERIA = ["count_words('') returns 0", "count_words(' \\n\\t ') returns 0",
            "count_words('one two\\nthree') returns 3"]
SIGNATURE = "wordcount.count_words(text: str) -> int"

PO_TICKET = {
    "verdict": "clear", "reasoning": "The ticket names the function, the failing input and the expected result.",
    "summary": "count_words raises IndexError for empty or whitespace-only text instead of returning 0.",
    "objectives": ["count_words returns 0 for empty or blank text", "words split on any whitespace are counted"],
    "out_of_scope": ["punctuation rules"], "assumptions": [], "constraints": ["keep the signature"],
    "success_metrics": [], "acceptance_criteria": CRITERIA,
}
PO_TICKET_WITHOUT_CRITERIA = {**PO_TICKET, "acceptance_criteria": []}
PLAN = {
    "reasoning": "One function and its regression tests: one task.",
    "interfaces": [{"name": "count_words", "signature": SIGNATURE, "description": "whitespace-separated words"}],
    "tech_stack": ["Python 3.11", "pytest"],
    "tasks": [{"key": "T1", "title": "Count words without crashing on blank text", "story_refs": [1, 2, 3],
               "files": ["wordcount.py", "tests/test_wordcount.py"], "depends_on": [],
               "definition_of_done": "count_words('') is 0 and the regression tests pass"}],
}
FIX = {
    "reasoning": "str.split() without arguments drops every run of whitespace, so blank text has no words.",
    "files": [
        {"path": "wordcount.py", "content": '"""Word counting."""\n\n\ndef count_words(text: str) -> int:\n'
                                            '    """Whitespace-separated words in text; 0 for empty or blank text."""\n'
                                            "    return len(text.split())\n"},
        {"path": "tests/test_wordcount.py", "content": "from wordcount import count_words\n\n\n"
                                                       "def test_empty_text_has_no_words():\n"
                                                       "    assert count_words('') == 0\n\n\n"
                                                       "def test_blank_text_has_no_words():\n"
                                                       "    assert count_words(' \\n\\t ') == 0\n"},
    ],
}
CODE_OK = {"verdict": "approve", "reasoning": "Small, correct and covered by regression tests.", "notes": []}
QC = {
    "reasoning": "One test per criterion through the public function.",
    "files": [{"path": "tests/acceptance/test_ticket.py", "content": (
        "from wordcount import count_words\n\n\n"
        "def test_empty_text_counts_zero():\n    assert count_words('') == 0\n\n\n"
        "def test_blank_text_counts_zero():\n    assert count_words(' \\n\\t ') == 0\n\n\n"
        "def test_words_on_several_lines_are_counted():\n    assert count_words('one two\\nthree') == 3\n")}],
    "coverage": {"AC-1": ["test_empty_text_counts_zero"], "AC-2": ["test_blank_text_counts_zero"],
                 "AC-3": ["test_words_on_several_lines_are_counted"]},
}
DEVOPS = {**answer("devops_engineer"), "runbook": "# Deploying wordcount\n\n1. Merge the branch once CI is green.\n",
          "rollback": "# Rolling back wordcount\n\n1. Revert the merge commit.\n"}
BUG_FIX_RUN = [PO_TICKET, PLAN, FIX, CODE_OK, QC, DEVOPS]
