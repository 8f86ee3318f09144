"""Acceptance tests written by QC from the stories' criteria, through the CLI a reader uses."""
import json

from readinglist.cli import main


def cli(tmp_path, *argv):
    return main(list(argv), path=tmp_path / "list.json")


def lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_adding_dune_lists_one_unread_book(tmp_path, capsys):
    assert cli(tmp_path, "add", "Dune", "Frank Herbert") == 0
    cli(tmp_path, "list", "--unread")
    assert lines(capsys)[-1] == "Dune — Frank Herbert"


def test_a_book_without_title_or_author_is_refused_naming_the_field(tmp_path, capsys):
    assert cli(tmp_path, "add", "", "Frank Herbert") == 1
    assert "title" in capsys.readouterr().err
    assert cli(tmp_path, "add", "Dune", "") == 1
    assert "author" in capsys.readouterr().err


def test_a_book_added_in_one_run_is_listed_in_the_next(tmp_path, capsys):
    cli(tmp_path, "add", "Dune", "Frank Herbert")
    capsys.readouterr()
    cli(tmp_path, "list")
    assert lines(capsys) == ["Dune — Frank Herbert"]


def test_a_duplicate_isbn_is_refused_and_the_list_is_unchanged(tmp_path, capsys):
    cli(tmp_path, "add", "Dune", "Frank Herbert", "--isbn", "9780441013593")
    before = (tmp_path / "list.json").read_text()
    assert cli(tmp_path, "add", "Dune II", "Frank Herbert", "--isbn", "9780441013593") == 1
    assert (tmp_path / "list.json").read_text() == before


def test_books_without_isbn_are_not_duplicates(tmp_path):
    assert cli(tmp_path, "add", "Notes", "Anon") == 0
    assert cli(tmp_path, "add", "Notes II", "Anon") == 0
    assert len(json.loads((tmp_path / "list.json").read_text())) == 2


def test_marking_read_stores_the_date(tmp_path, capsys):
    cli(tmp_path, "add", "Dune", "Frank Herbert")
    assert cli(tmp_path, "read", "Dune", "--on", "2026-11-20") == 0
    assert json.loads((tmp_path / "list.json").read_text())[0]["read_on"] == "2026-11-20"


def test_marking_an_unknown_book_fails_clearly(tmp_path, capsys):
    assert cli(tmp_path, "read", "Emma", "--on", "2026-11-20") == 1
    assert "Emma" in capsys.readouterr().err


def test_an_invalid_date_is_refused(tmp_path, capsys):
    cli(tmp_path, "add", "Dune", "Frank Herbert")
    assert cli(tmp_path, "read", "Dune", "--on", "20/11/2026") == 1


def test_unread_books_are_listed_in_the_order_added(tmp_path, capsys):
    for title in ("B", "A", "C"):
        cli(tmp_path, "add", title, "X")
    capsys.readouterr()
    cli(tmp_path, "list", "--unread")
    assert lines(capsys) == ["B — X", "A — X", "C — X"]


def test_read_books_show_dates_most_recent_first(tmp_path, capsys):
    for title, day in (("A", "01"), ("B", "03"), ("C", "02")):
        cli(tmp_path, "add", title, "X")
        cli(tmp_path, "read", title, "--on", f"2026-01-{day}")
    capsys.readouterr()
    cli(tmp_path, "list", "--read")
    assert lines(capsys) == ["B — X (finished 2026-01-03)", "C — X (finished 2026-01-02)", "A — X (finished 2026-01-01)"]


def test_an_empty_list_prints_no_books_and_exits_0(tmp_path, capsys):
    assert cli(tmp_path, "list") == 0
    assert lines(capsys) == ["No books."]
