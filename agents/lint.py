"""Lint generated code with ruff, as a subprocess: ruff reads files, it never runs them."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from agents.runner_reach import reach_findings
from agents.schemas.engineering import engineer_may_not_write

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


def runner_reach_findings(path: Path) -> list[str]:
    """agents/runner_reach.py over every Python file of the engineer's in the workspace (QC's and DevOps' are
    theirs): the engineer's output is checked as it is written, this catches whatever got in before that check."""
    root = Path(path)
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(n for n in filenames if n.endswith(".py")):
            relative = Path(dirpath, name).relative_to(root).as_posix()
            if not engineer_may_not_write(relative) and not Path(dirpath, name).is_symlink():
                files.append((relative, Path(dirpath, name).read_text(errors="replace")))
    return reach_findings(files)
