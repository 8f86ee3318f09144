"""The benchmarks still run against the current schema and code (their figures are printed, not tested)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench_env(broker_url) -> dict[str, str]:
    """The benchmarks' own Redis database (12, beside the tests' broker): they flush it as they go."""
    db = settings.DATABASES["default"]
    server = f"postgres://{db.get('USER') or 'postgres'}@{db['HOST']}:{db['PORT'] or 5432}"
    return {**os.environ, "BENCH_PG": server, "BENCH_BROKER_URL": broker_url.rsplit("/", 1)[0] + "/12"}


def test_the_step_profile_benchmark_runs_the_real_pipeline_on_a_scratch_database(bench_env):
    done = subprocess.run([sys.executable, "bench/step_profile.py", "--requirements", "1"], cwd=ROOT, env=bench_env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "median per step key, ms" in done.stdout and "sum of 8" in done.stdout
