"""A feature that touches a library function and its command line: semicolon-separated files."""
from tests.ticket_corpus.base import Entry

PYPROJECT = """\
[project]
name = "csvtools"
version = "0.4.0"
requires-python = ">=3.10"
scripts = { csvstat = "csvtools.cli:main" }
"""
READER_V1 = '''\
"""Reading CSV files into rows."""
import csv
from pathlib import Path


def read_rows(path: Path) -> list[dict[str, str]]:
    """The file's rows as dicts keyed by the header line."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
'''
READER_V2 = '''\
"""Reading CSV files into rows."""
import csv
from pathlib import Path


def read_rows(path: Path) -> list[dict[str, str]]:
    """The file's rows as dicts keyed by the header line; blank lines are skipped."""
    with open(path, newline="", encoding="utf-8") as handle:
        return [row for row in csv.DictReader(handle) if any((value or "").strip() for value in row.values())]
'''
CLI = '''\
"""csvstat FILE: how many rows and columns a CSV file has."""
import argparse
import sys
from pathlib import Path

from csvtools.reader import read_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="csvstat", description=__doc__)
    parser.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    rows = read_rows(args.file)
    columns = len(rows[0]) if rows else 0
    print(f"{len(rows)} rows, {columns} columns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''
READER_TESTS = '''\
from csvtools.reader import read_rows


def test_rows_are_keyed_by_the_header(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("name,age\\nAda,36\\nAlan,41\\n")
    assert read_rows(path) == [{"name": "Ada", "age": "36"}, {"name": "Alan", "age": "41"}]


def test_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("name,age\\nAda,36\\n,\\n\\nAlan,41\\n")
    assert [row["name"] for row in read_rows(path)] == ["Ada", "Alan"]
'''
CLI_TESTS = '''\
from csvtools.cli import main


def test_it_counts_rows_and_columns(tmp_path, capsys):
    path = tmp_path / "people.csv"
    path.write_text("name,age\\nAda,36\\nAlan,41\\n")
    assert main([str(path)]) == 0
    assert capsys.readouterr().out == "2 rows, 2 columns\\n"
'''

FIX = {
    "reasoning": "read_rows passes a delimiter (default ',') to csv.DictReader, and csvstat gains --delimiter, "
                 "passed through; the defaults keep today's behaviour.",
    "edits": [
        {"path": "csvtools/reader.py",
         "search": 'def read_rows(path: Path) -> list[dict[str, str]]:\n'
                   '    """The file\'s rows as dicts keyed by the header line; blank lines are skipped."""\n'
                   '    with open(path, newline="", encoding="utf-8") as handle:\n'
                   '        return [row for row in csv.DictReader(handle) if any((value or "").strip() '
                   'for value in row.values())]\n',
         "replace": 'def read_rows(path: Path, delimiter: str = ",") -> list[dict[str, str]]:\n'
                    '    """The file\'s rows as dicts keyed by the header line; blank lines are skipped."""\n'
                    '    with open(path, newline="", encoding="utf-8") as handle:\n'
                    '        rows = csv.DictReader(handle, delimiter=delimiter)\n'
                    '        return [row for row in rows if any((value or "").strip() for value in row.values())]\n'},
        {"path": "csvtools/cli.py",
         "search": '    parser.add_argument("file", type=Path)\n    args = parser.parse_args(argv)\n'
                   '    rows = read_rows(args.file)\n',
         "replace": '    parser.add_argument("file", type=Path)\n'
                    '    parser.add_argument("--delimiter", default=",", help="the character between fields (default \',\')")\n'
                    '    args = parser.parse_args(argv)\n'
                    '    rows = read_rows(args.file, delimiter=args.delimiter)\n'},
    ],
    "files": [{"path": "tests/test_delimiter.py", "content": '''\
from csvtools.cli import main
from csvtools.reader import read_rows


def test_semicolons_separate_fields_when_asked(tmp_path, capsys):
    path = tmp_path / "people.csv"
    path.write_text("name;age\\nAda;36\\n")
    assert read_rows(path, delimiter=";") == [{"name": "Ada", "age": "36"}]
    assert main([str(path), "--delimiter", ";"]) == 0
    assert capsys.readouterr().out == "1 rows, 2 columns\\n"
'''}],
}
QC = {
    "reasoning": "The library call and the command line, each with a semicolon file, and the default kept.",
    "files": [{"path": "tests/acceptance/test_semicolons.py", "content": '''\
from csvtools.cli import main
from csvtools.reader import read_rows


def test_read_rows_takes_a_delimiter(tmp_path):
    path = tmp_path / "prices.csv"
    path.write_text("item;price\\ntea;3,50\\n")
    assert read_rows(path, delimiter=";") == [{"item": "tea", "price": "3,50"}]


def test_csvstat_takes_a_delimiter_option(tmp_path, capsys):
    path = tmp_path / "prices.csv"
    path.write_text("item;price;stock\\ntea;3,50;4\\ncake;4,20;1\\n")
    assert main([str(path), "--delimiter", ";"]) == 0
    assert capsys.readouterr().out == "2 rows, 3 columns\\n"


def test_commas_stay_the_default(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("name,age\\nAda,36\\n")
    assert read_rows(path) == [{"name": "Ada", "age": "36"}]
'''}],
    "coverage": {"AC-1": ["test_read_rows_takes_a_delimiter"], "AC-2": ["test_csvstat_takes_a_delimiter_option"],
                 "AC-3": ["test_commas_stay_the_default"]},
}
HIDDEN = {"tests/test_hidden_delimiter.py": '''\
from csvtools.cli import main
from csvtools.reader import read_rows


def test_tabs_work_too(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("a\\tb\\n1\\t2\\n")
    assert read_rows(path, delimiter="\\t") == [{"a": "1", "b": "2"}]


def test_blank_lines_are_still_skipped_with_a_delimiter(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("a;b\\n1;2\\n;\\n3;4\\n")
    assert [row["a"] for row in read_rows(path, delimiter=";")] == ["1", "3"]


def test_the_command_line_counts_semicolon_columns(tmp_path, capsys):
    path = tmp_path / "s.csv"
    path.write_text("a;b;c;d\\n1;2;3;4\\n")
    main([str(path), "--delimiter", ";"])
    assert capsys.readouterr().out == "1 rows, 4 columns\\n"
'''}

ENTRY = Entry(
    key="csvtools-delimiter",
    kind="feature",
    title="Read semicolon-separated files",
    body="Files exported from our spreadsheets in Europe use ';' between fields, and csvstat reports them as one "
         "column. Please add a delimiter: read_rows(path, delimiter=\";\") in the library and `csvstat FILE "
         "--delimiter \";\"` on the command line. Without it, ',' stays the default.",
    commits=(
        ("Read CSV rows", {"pyproject.toml": PYPROJECT, "csvtools/__init__.py": "", "csvtools/reader.py": READER_V1}),
        ("Add csvstat", {"csvtools/cli.py": CLI, "tests/test_cli.py": CLI_TESTS}),
        ("Skip blank lines", {"csvtools/reader.py": READER_V2, "tests/test_reader.py": READER_TESTS}),
    ),
    summary="read_rows and csvstat only read comma-separated files; both must take a delimiter, ',' by default.",
    criteria=('read_rows(path, delimiter=";") splits fields on semicolons',
              'csvstat FILE --delimiter ";" counts semicolon-separated columns',
              "without a delimiter, fields are split on commas as before"),
    interface={"name": "read_rows", "signature": 'csvtools.reader.read_rows(path: Path, delimiter: str = ",") '
               '-> list[dict[str, str]]', "description": "and csvstat's --delimiter option"},
    fix=FIX,
    qc=QC,
    hidden=HIDDEN,
)
