"""What the management commands share."""
from __future__ import annotations

import os
import shlex
import sys


def python_shown() -> str:
    """This interpreter as a person would type it here: `.venv/bin/python` from the checkout, else its full path
    (a command printed for pasting must run in a fresh shell, where `python` may have no Django)."""
    relative = os.path.relpath(sys.executable)
    return shlex.quote(sys.executable if relative.startswith("..") else relative)
