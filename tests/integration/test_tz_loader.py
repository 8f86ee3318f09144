"""Timestamps come back as Django's own loader gives them, through psycopg's faster default loader
(aiteam.db.postgresql.base.tz_loader): for values across the whole range, in any session time zone, with a
time zone to put in place (USE_TZ) or none (naive values), the same value with the same tzinfo, or the same
error where Django's cannot load it either (a BC date)."""
import datetime
import zoneinfo

import psycopg
import pytest
from django.db import connection
from django.db.backends.postgresql.base import TIMESTAMPTZ_OID
from django.db.backends.postgresql.psycopg_any import register_tzloader
from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg import sql
from psycopg.adapt import AdaptersMap
from psycopg.pq import Format

from aiteam.db.postgresql.base import tz_loader
from lifecycle.models import Organization

pytestmark = pytest.mark.django_db

UTC = datetime.UTC
ZONES = ["UTC", "America/St_Johns", "Asia/Kathmandu", "Pacific/Kiritimati"]
moments = st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31, 23, 59),
                       timezones=st.sampled_from([UTC, zoneinfo.ZoneInfo("America/St_Johns")]))


def djangos_loader(tz):
    """The class Django registers for a connection whose time zone is `tz`."""
    context = AdaptersMap(psycopg.adapters)
    register_tzloader(tz, context)
    return context.get_loader(TIMESTAMPTZ_OID, Format.TEXT)


def load(loader, conn, text: str):
    try:
        return loader(TIMESTAMPTZ_OID, conn).load(text.encode())
    except Exception as exc:  # compared by type: both must refuse the same values
        return type(exc)


@pytest.fixture(scope="module")
def session(django_db_blocker):
    with django_db_blocker.unblock():
        conn = connection.get_new_connection(connection.get_connection_params())
    yield conn
    conn.close()


@settings(max_examples=200, deadline=None)
@given(moment=moments, zone=st.sampled_from(ZONES), naive=st.booleans())
@example(moment=datetime.datetime(2010, 3, 14, 0, 1, tzinfo=zoneinfo.ZoneInfo("America/St_Johns")), zone="UTC",
         naive=False)  # a local time in the DST gap (St John's moved its clocks at 00:01 then)
def test_a_timestamp_loads_as_djangos_loader_loads_it(session, moment, zone, naive):
    session.execute(sql.SQL("SET TIME ZONE {}").format(sql.Literal(zone)))
    (text,) = session.execute("SELECT %s::timestamptz::text", [moment]).fetchone()
    tz = None if naive else zoneinfo.ZoneInfo(zone)  # Django sets the session to its own zone, or UTC naive
    ours, djangos = load(tz_loader(tz), session, text), load(djangos_loader(tz), session, text)
    assert ours == djangos
    if isinstance(djangos, datetime.datetime):
        assert ours.tzinfo is djangos.tzinfo
        # aware: the same instant as was stored (by timestamp: a local time in a DST gap compares unequal)
        assert naive or ours.timestamp() == moment.timestamp()


def test_the_connection_loads_timestamps_with_the_native_loader_and_django_keeps_it():
    connection.ensure_connection()
    with connection.cursor() as cursor:  # Django's create_cursor would register its own if the zones differed
        assert cursor.cursor.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT) is tz_loader(connection.timezone)
    org = Organization.objects.create(slug="tz", name="tz")
    org.refresh_from_db()
    assert org.created_at.tzinfo is UTC
