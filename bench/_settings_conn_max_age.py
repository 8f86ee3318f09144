"""aiteam.settings with persistent database connections, for the diagnostic run of bench/api_load.py only
(`--conn-max-age SECONDS`): shows what opening a PostgreSQL connection per request costs."""
import os

from aiteam.settings import *  # noqa: F401,F403
from aiteam.settings import DATABASES

DATABASES["default"]["CONN_MAX_AGE"] = float(os.environ.get("BENCH_CONN_MAX_AGE", "60"))
