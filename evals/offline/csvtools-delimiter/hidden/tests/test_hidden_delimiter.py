from csvtools.cli import main
from csvtools.reader import read_rows


def test_tabs_work_too(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("a\tb\n1\t2\n")
    assert read_rows(path, delimiter="\t") == [{"a": "1", "b": "2"}]


def test_blank_lines_are_still_skipped_with_a_delimiter(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("a;b\n1;2\n;\n3;4\n")
    assert [row["a"] for row in read_rows(path, delimiter=";")] == ["1", "3"]


def test_the_command_line_counts_semicolon_columns(tmp_path, capsys):
    path = tmp_path / "s.csv"
    path.write_text("a;b;c;d\n1;2;3;4\n")
    main([str(path), "--delimiter", ";"])
    assert capsys.readouterr().out == "1 rows, 4 columns\n"
