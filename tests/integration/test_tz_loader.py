"""Timestamps come back as Django's own loader gives them, through psycopg's faster default loader
(aiteam.db.postgresql.base.tz_loader): the same instant, tzinfo datetime.timezone.utc, for any value."""
import datetime

import psycopg
import pytest
from django.db import connection
from django.db.backends.postgresql.base import TIMESTAMPTZ_OID
from django.db.backends.postgresql.psycopg_any import register_tzloader
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.adapt import AdaptersMap
from psycopg.pq import Format

from aiteam.db.postgresql.base import tz_loader
from lifecycle.models import Organization

pytestmark = pytest.mark.django_db

UTC = datetime.UTC
moments = st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=datetime.datetime(9999, 12, 30),
                       timezones=st.sampled_from([UTC, datetime.timezone(datetime.timedelta(hours=-9, minutes=-30)),
                                                  datetime.timezone(datetime.timedelta(hours=14))]))


def djangos_loader():
    """The class Django would register for this connection's time zone."""
    context = AdaptersMap(psycopg.adapters)
    register_tzloader(connection.timezone, context)
    return context.get_loader(TIMESTAMPTZ_OID, Format.TEXT)


@settings(max_examples=150, deadline=None)
@given(moments)
def test_a_timestamp_loads_as_djangos_loader_loads_it(moment):
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::timestamptz, %s::timestamptz::text", [moment, moment])
        loaded, text = cursor.fetchone()
        raw = cursor.cursor  # the psycopg cursor: its loaders are what the connection registered
        expected = djangos_loader()(TIMESTAMPTZ_OID, raw).load(text.encode())
    assert loaded == moment == expected
    assert loaded.tzinfo is expected.tzinfo is UTC
    assert (loaded.year, loaded.microsecond) == (expected.year, expected.microsecond)


def test_the_connection_loads_timestamps_with_the_native_loader_and_django_keeps_it():
    connection.ensure_connection()
    with connection.cursor() as cursor:  # Django's create_cursor would register its own if the zones differed
        assert cursor.cursor.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT) is tz_loader(connection.timezone)
    org = Organization.objects.create(slug="tz", name="tz")
    org.refresh_from_db()
    assert org.created_at.tzinfo is UTC


def test_without_a_time_zone_the_value_is_naive_like_djangos():
    loader = tz_loader(None)
    with connection.cursor() as cursor:
        ours = loader(TIMESTAMPTZ_OID, cursor.cursor).load(b"2026-11-26 23:47:48.123456+00")
    assert ours == datetime.datetime(2026, 11, 26, 23, 47, 48, 123456) and ours.tzinfo is None
