"""Lint generated code with ruff, as a subprocess: ruff reads files, it never runs them."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

RULES = "E9,F"  # syntax errors and pyflakes: real defects, not taste


def ruff_findings(path: Path, timeout_s: float = 60) -> list[str]:
    """`file:line: CODE message` for each finding; a missing ruff is itself a finding."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        return ["ruff is not installed: the lint gate cannot pass"]
    done = subprocess.run(
        [ruff, "check", "--no-cache", "--isolated", "--select", RULES, "--output-format", "json", "--exit-zero", "."],
        cwd=path, capture_output=True, text=True, timeout=timeout_s,
    )
    try:
        findings = json.loads(done.stdout or "[]")
    except ValueError:
        return [f"ruff failed: {done.stderr.strip()[:500]}"]
    root = Path(path).resolve()
    return [f"{Path(f['filename']).resolve().relative_to(root)}:{f['location']['row']}: {f['code']} {f['message']}"
            for f in findings]
