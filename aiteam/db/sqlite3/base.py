"""Django's SQLite backend with the transaction epoch aiteam.db.loaded trusts (as on PostgreSQL)."""
from __future__ import annotations

from django.db.backends.sqlite3 import base

from aiteam.db.loaded import TransactionEpoch


class DatabaseWrapper(TransactionEpoch, base.DatabaseWrapper):
    pass
