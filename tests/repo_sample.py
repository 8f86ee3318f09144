"""A small real git repository for the repository-index tests: a shop package with two commits, plus the files
an index must leave out (a binary, a huge file, a symlink out of the repository, an ignored and an untracked file,
a Python file that does not parse)."""
from __future__ import annotations

import subprocess
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@localhost", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "PATH": "/usr/bin:/bin"}
SECRET = "TOPSECRETVALUE"
HUGE_LIMIT = 4096  # the max_file_bytes the tests index with, so the huge file need not be large

FILES = {
    "shop/__init__.py": "",
    "shop/models.py": '''"""Orders and their lines."""


class Order:
    """A customer's order."""

    def __init__(self, lines):
        self.lines = lines

    def total(self):
        return sum(line.amount() for line in self.lines)


class LineItem:
    def __init__(self, price, quantity):
        self.price, self.quantity = price, quantity

    def amount(self):
        return self.price * self.quantity


def order_total(order: Order) -> int:
    return order.total()
''',
    "shop/pricing.py": '''from shop.models import Order, order_total


class DiscountCode:
    def __init__(self, code, percent):
        self.code, self.percent = code, percent


def apply_discount(order: Order, code: DiscountCode) -> float:
    """Take the code's percentage off the order's total."""
    return order_total(order) * (100 - code.percent) / 100
''',
    "shop/invoice.py": '''from shop.models import Order, order_total


class InvoiceRenderer:
    def render(self, order: Order) -> str:
        return render_invoice(order)


def render_invoice(order: Order) -> str:
    return f"Total: {order_total(order)}"
''',
    "shop/views.py": '''from shop.invoice import render_invoice
from shop.models import LineItem, Order, order_total
from shop.pricing import apply_discount


def checkout(request):
    order = Order([LineItem(3, 2)])
    return render_invoice(order), order_total(order), apply_discount(order, None)
''',
    "shop/utils/http_client.py": '''class HttpResponseParser:
    """Reads a raw HTTP response."""

    def parse_header_line(self, line: bytes) -> tuple[str, str]:
        name, _, value = line.decode().partition(":")
        return name.strip(), value.strip()

    def parse_status(self, line):
        return int(line.split()[1])
''',
    "shop/broken.py": "def oops(:\n    pass\n",
    "README.md": "# Shop\n\nA tiny shop.\n",
    ".gitignore": "build/\n",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_sample_repo(base: Path) -> Path:
    repo = base / "shop-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for path, text in FILES.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (repo / "data").mkdir()
    (repo / "data/huge.py").write_text("def huge_function():\n    pass\n" + "# padding\n" * 1000)
    outside = base / "outside.py"
    outside.write_text(f"def {SECRET}():\n    pass\n")
    (repo / "link.py").symlink_to(outside)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    (repo / "shop/pricing.py").write_text(FILES["shop/pricing.py"] + "\n\ndef free_shipping(order):\n    return True\n")
    git(repo, "commit", "-q", "-am", "free shipping")
    (repo / "build").mkdir()
    (repo / "build/junk.py").write_text("def ignored_junk():\n    pass\n")
    (repo / "untracked.py").write_text("def not_committed():\n    pass\n")
    return repo
