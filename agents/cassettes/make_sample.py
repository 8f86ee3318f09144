"""Writes sample.json, the bundled replay cassette (hand-authored answers in the shape the model returns).

Run: python agents/cassettes/make_sample.py
"""
import json
from pathlib import Path

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
  {"role": "product_owner", "match": [], "tool_input": po_clear, "model": "claude-sonnet-5-5", "usage": usage(1480, 610), "latency_ms": 6200},
  {"role": "product_owner", "match": ["something cool"], "tool_input": po_vague, "model": "claude-sonnet-5-5", "usage": usage(1210, 180), "latency_ms": 2100},
  {"role": "product_owner", "match": ["something cool", "small team"], "tool_input": po_after_answer, "model": "claude-sonnet-5-5", "usage": usage(1390, 420, 1024), "latency_ms": 4300},
  {"role": "business_analyst", "match": [], "tool_input": ba1, "model": "claude-sonnet-5-5", "usage": usage(1920, 1150), "latency_ms": 9800},
  {"role": "business_analyst", "match": ['"round": 2'], "tool_input": ba2, "model": "claude-sonnet-5-5", "usage": usage(2310, 1320, 1024), "latency_ms": 10400},
  {"role": "business_analyst", "match": ["small team"], "tool_input": ba_todo, "model": "claude-sonnet-5-5", "usage": usage(1500, 700), "latency_ms": 7000},
]}
(Path(__file__).parent / "sample.json").write_text(json.dumps(c, indent=2, ensure_ascii=False) + "\n")
