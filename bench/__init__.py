"""Benchmarks: figures, not tests (bench/README.md)."""
import os

# The benchmarks run their own scratch databases; a deployment refuses a missing key, a benchmark needs none.
os.environ.setdefault("DJANGO_SECRET_KEY", "aiteam-bench-only-not-a-secret")
