"""Branch names: the base branch a project names, and the branch each requirement works on.

`branch_name("#42", "Fix the total")` -> `aiteam/42-fix-the-total`: the ticket key lower-cased with only
letters, digits, '_' and '-' kept (`#42` -> `42`, `PROJ-7` -> `proj-7`, no dots), then a slug of the title. Both are
bounded, so a ticket's text cannot make a ref longer than git or a host accepts, and what is left is a ref git
takes on any platform (no '..', no '.lock', no leading '-' that a command line could read as an option).
"""
from __future__ import annotations

import re
import unicodedata

PREFIX = "aiteam/"
MAX_KEY = 32
MAX_SLUG = 48
_BRANCH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")


class BranchRefused(ValueError):
    """A branch name git would refuse or a command line could misread."""


def checked_branch(name: str) -> str:
    """`name` when it is a safe branch name (the rule of the Project's base_branch field), else BranchRefused."""
    if not _BRANCH.fullmatch(name or "") or ".." in name or name.endswith((".", ".lock")) or "/." in name \
            or ".lock/" in name or len(name) > 200:
        raise BranchRefused(f"{name!r} is not a branch name such as main or release/2.1")
    return name


def branch_name(key: str, title: str) -> str:
    """`aiteam/<key>-<slug>`; either part may be empty (a brief has no ticket key), not both."""
    parts = [p for p in (_clean(key, MAX_KEY, keep="_"), _clean(title, MAX_SLUG, keep="")) if p]
    if not parts:
        raise BranchRefused("a requirement's branch needs a ticket key or a title with a letter or digit in it")
    return checked_branch(PREFIX + "-".join(parts))


def _clean(text: str, limit: int, *, keep: str) -> str:
    """Lower-case ASCII letters and digits (accents folded), `keep` characters, and single '-' between words."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    allowed = re.escape(keep)
    return re.sub(rf"[^a-z0-9{allowed}]+", "-", ascii_text)[:limit].strip("-_")
