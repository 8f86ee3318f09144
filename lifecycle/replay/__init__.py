"""Replay of a recorded run, the database side: re-run a finished or failed requirement from what it recorded.

- `runs.py`: the service that starts a replay, decides its gates as the source's were decided, and sweeps and
  compares replays that came to rest (transactions and locks as in lifecycle/services).
- `recordings.py`: a source run's `LLMCall` rows and artifacts read back as plain data for the replay's steps.
- `compare.py`: a replay against its source (transitions, artifact hashes, model requests).
- `admin.py`: the Requirement admin's replay action and comparison display (mixed in by lifecycle/admin.py).

The `Replay` model lives in lifecycle/models/replay.py with the other models, as Django expects. The provider
side (the cassette, the recorded-run provider, the recording wrapper) is agents/llm/replay.py: agents/ is a leaf
that never imports lifecycle, so replay is one module there and this package here (docs/adr/0021).
"""
