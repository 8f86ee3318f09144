"""tests/query_shapes.py: a statement's shape leaves its values out, and a test is left to SQLite only when every
shape it sends is still sent by a test that stays on PostgreSQL."""
import json

import pytest
from django.contrib.auth import get_user_model
from django.test.utils import CaptureQueriesContext

from tests import query_shapes
from tests.query_shapes import Recorder, left_out, read_list, shape


def test_values_list_lengths_and_made_up_names_do_not_make_a_statement_new():
    assert shape('SELECT "a" FROM "t" WHERE "id" IN (%s, %s, %s) LIMIT 21') == \
        shape('SELECT  "a"\nFROM "t" WHERE "id" IN (%s) LIMIT 1')
    assert shape('INSERT INTO "t" ("a", "b") VALUES (%s, %s), (%s, %s) RETURNING "t"."id"') == \
        shape('INSERT INTO "t" ("a", "b") VALUES (%s, %s) RETURNING "t"."id"')
    assert shape('SAVEPOINT "s140_x3"') == shape('SAVEPOINT "s9_x12"')
    assert shape("SELECT 'a''b' = %s") == shape("SELECT 'c' = %s")


def test_other_columns_tables_or_clauses_are_other_statements():
    assert shape('SELECT "a" FROM "t"') != shape('SELECT "b" FROM "t"')
    assert shape('SELECT "a" FROM "t" WHERE "a" = %s') != shape('SELECT "a" FROM "t" WHERE "a" > %s')
    assert shape('SELECT "a" FROM "t" FOR UPDATE') != shape('SELECT "a" FROM "t"')


def test_the_most_expensive_test_goes_first_and_a_shape_only_it_sends_keeps_it():
    tests = {
        "slow": {"seconds": 9.0, "shapes": ["A", "B"]},
        "slower": {"seconds": 12.0, "shapes": ["A", "B", "C"]},  # C is its own: kept
        "cheap": {"seconds": 0.5, "shapes": ["A"]},
        "middle": {"seconds": 3.0, "shapes": ["B"]},
        "silent": {"seconds": 5.0, "shapes": []},  # its queries went where the recorder does not see: kept
        "counting": {"seconds": 20.0, "shapes": ["A"], "counts": True},  # asserts a number of queries: kept
    }
    assert left_out(tests, min_seconds=1.0) == ["middle", "slow"]
    # "slow" out, then "middle" out: B is still sent by "slower"; A by "slower" and "cheap"
    assert left_out(tests, min_seconds=4.0) == ["slow"]


def test_two_tests_sending_the_same_shapes_leave_one_of_them():
    tests = {"a": {"seconds": 2.0, "shapes": ["X"]}, "b": {"seconds": 2.0, "shapes": ["X"]}}
    assert left_out(tests, min_seconds=1.0) == ["a"]


@pytest.mark.django_db
def test_the_recorder_writes_each_tests_shapes_and_seconds(tmp_path):
    from django.db import connection

    recorder = Recorder(str(tmp_path / "shapes"))
    with connection.execute_wrapper(recorder.wrapper("tests/x.py::test_one")):
        get_user_model().objects.filter(username__in=["a", "b"]).count()
        get_user_model().objects.filter(username__in=["c"]).count()
    recorder.timed(type("Report", (), {"nodeid": "tests/x.py::test_one", "duration": 1.25})())
    recorder.write("gw9")
    written = json.loads((tmp_path / "shapes" / "gw9.json").read_text())
    assert list(written) == ["tests/x.py::test_one"] and written["tests/x.py::test_one"]["seconds"] == 1.25
    assert len(written["tests/x.py::test_one"]["shapes"]) == 1 and "IN (%s)" in written["tests/x.py::test_one"]["shapes"][0]


def test_a_test_that_counts_queries_is_seen_as_one():
    def counted():
        with CaptureQueriesContext(None):
            pass

    def plain():
        return 1

    assert query_shapes.counts_queries(["db"], counted) and not query_shapes.counts_queries(["db"], plain)
    assert query_shapes.counts_queries(["db", "django_assert_num_queries"], plain)


def test_the_list_ignores_its_header_and_blank_lines(tmp_path):
    listed = tmp_path / "list.txt"
    listed.write_text("# header\n\ntests/unit/test_a.py::test_b[x]\n")
    assert read_list(listed) == {"tests/unit/test_a.py::test_b[x]"}
    assert read_list(tmp_path / "missing.txt") == set()
    assert all(node.startswith("tests/") for node in read_list(query_shapes.LIST))
