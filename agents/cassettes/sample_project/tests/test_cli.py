from readinglist.cli import main


def run(tmp_path, *argv):
    return main(list(argv), path=tmp_path / "books.json")


def test_add_then_list_unread(tmp_path, capsys):
    assert run(tmp_path, "add", "Dune", "Frank Herbert", "--isbn", "9780441013593") == 0
    assert run(tmp_path, "list", "--unread") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "Dune — Frank Herbert"


def test_read_books_show_their_finish_date(tmp_path, capsys):
    run(tmp_path, "add", "Dune", "Frank Herbert")
    assert run(tmp_path, "read", "Dune", "--on", "2026-11-20") == 0
    run(tmp_path, "list", "--read")
    assert capsys.readouterr().out.splitlines()[-1] == "Dune — Frank Herbert (finished 2026-11-20)"


def test_an_empty_list_prints_no_books_and_succeeds(tmp_path, capsys):
    assert run(tmp_path, "list") == 0
    assert capsys.readouterr().out.strip() == "No books."


def test_errors_are_reported_with_exit_status_1(tmp_path, capsys):
    assert run(tmp_path, "add", "", "Nobody") == 1
    assert run(tmp_path, "read", "Emma", "--on", "2026-01-01") == 1
    assert run(tmp_path, "read", "Emma", "--on", "yesterday") == 1
    assert "error:" in capsys.readouterr().err
