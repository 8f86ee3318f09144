"""docs/configuration.md is every environment variable the settings read (the README says so)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_variable_the_settings_read_has_a_row():
    read = set()
    for path in (ROOT / "aiteam").glob("*.py"):
        read |= set(re.findall(r'env_[a-z]+\(\s*"([A-Z][A-Z0-9_]+)"', path.read_text()))
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", (ROOT / "docs" / "configuration.md").read_text()))
    assert len(read) > 50
    assert sorted(read - documented) == []
