"""Text for pull requests, merge requests and ticket comments, written once and rendered for each host.

Untrusted text (a ticket's title, a test's name, a path, the model's summary, an error that quotes any of them) is
shown literally and can do nothing: in Markdown (GitHub, GitLab) it goes into a code span or a fenced code block
whose backtick run is longer than any the text holds, where no mention pings anyone, no `#12` or `!3` links or
closes anything, no link, image or HTML renders, and nothing is hidden (an HTML comment shows as text). Lines of
a block that start with `/` are indented by one space, so GitLab runs no quick action (`/close`, `/merge`) from
them. In Jira's document format text nodes are literal already. Where code formatting does not exist (a
title, a commit message), `neutral` makes one line, breaks every reference (and address) with a zero-width space
and drops control characters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from unicodedata import category

_BACKTICKS = re.compile(r"`+")
_REFERENCE = re.compile(r"([@#!~%$&])(?=\w)")  # mentions, issues, MRs, labels, milestones, snippets, epics
_ADDRESS = re.compile(r"(?<=:)(?=//)")  # scheme://: an issue's address is a reference too (GitLab closes by one)
# No space, quote, bracket or parenthesis (the link could end early), no @ (credentials, or a mention where shown)
_SAFE_HREF = re.compile(r"^https?://[A-Za-z0-9._~:/?#!$&'*+,;=%-]+$")
ZERO_WIDTH_SPACE = "\u200b"


@dataclass(frozen=True)
class Span:
    """A piece of a paragraph: our own words, a link, or untrusted text shown literally (`literal`)."""

    text: str
    href: str = ""  # only an address that `safe_href` accepts is linked
    literal: bool = False


@dataclass(frozen=True)
class Block:
    """Untrusted text of several lines, shown as it is (a code block in Markdown, a code-marked text in Jira)."""

    text: str


Part = tuple[Span, ...] | Block  # a paragraph, or a block


def ours(text: str) -> Span:
    return Span(text)


def literal(text: str, limit: int = 200) -> Span:
    """Untrusted text for one line: whitespace collapsed (a blank line would end a code span), bounded."""
    return Span(bounded(" ".join(without_controls(text).split()), limit), literal=True)


def link(text: str, href: str) -> Span:
    return Span(text, href=href if safe_href(href) else "")


def block(text: str, limit: int = 4000) -> Block:
    return Block(bounded(without_controls_by_line(text, keep="\t"), limit))


def without_controls(text: str, keep: str = "") -> str:
    """Untrusted text with its format characters (Unicode Cf: bidi overrides, zero-width characters, which hide or
    reorder what it says) dropped and its control characters (Cc: ESC, C0 and C1) made spaces, but those in `keep`."""
    return "".join(" " if category(c) == "Cc" and c not in keep else c for c in text if category(c) != "Cf")


def without_controls_by_line(text: str, keep: str = "") -> str:
    """Untrusted text of several lines: each line break (CR LF, CR, U+2028, NEL…) one newline, each line
    `without_controls` and its trailing spaces, blank lines at either end trimmed."""
    return "\n".join(without_controls(line, keep).rstrip() for line in text.splitlines()).strip("\n")


def bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def safe_href(href: str) -> bool:
    return len(href) <= 500 and bool(_SAFE_HREF.match(href))


def neutral(text: str, limit: int = 250) -> str:
    """One line of plain text that cannot mention or reference anything (for titles and commit messages, where
    Markdown is not read): no line break (so no trailer such as Co-authored-by, no second paragraph), a zero-width
    space after each reference sign and inside each `scheme://`, at most `limit` characters."""
    flat = " ".join(without_controls(text).split())
    return bounded(_ADDRESS.sub(ZERO_WIDTH_SPACE, _REFERENCE.sub(rf"\1{ZERO_WIDTH_SPACE}", flat)), limit)


def to_markdown(parts: list[Part]) -> str:
    return "\n\n".join(_block_markdown(p) if isinstance(p, Block) else "".join(_span_markdown(s) for s in p)
                       for p in parts) + "\n"


def to_adf(parts: list[Part]) -> dict[str, Any]:
    """Atlassian Document Format (Jira Cloud's comment body): a doc of paragraphs of text nodes."""
    content = []
    for part in parts:
        if isinstance(part, Block):  # one code-marked text node per line, joined by hard breaks
            lines = [[{"type": "hardBreak"}] + ([_adf_text(Span(line, literal=True))] if line else [])
                     for line in part.text.split("\n")]
            nodes = [node for line in lines for node in line][1:]
        else:
            nodes = [_adf_text(s) for s in part if s.text]
        content.append({"type": "paragraph", "content": nodes})
    return {"type": "doc", "version": 1, "content": content}


def _span_markdown(span: Span) -> str:
    if span.literal:
        return code_span(span.text)
    if span.href:
        return f"[{span.text}]({span.href})"
    return span.text


def code_span(text: str) -> str:
    """`text` as an inline code span: fenced by one backtick more than its longest run, padded when it starts or
    ends with a backtick (CommonMark strips one space on each side)."""
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _block_markdown(part: Block) -> str:
    fence = "`" * max(3, max((len(run) for run in _BACKTICKS.findall(part.text)), default=0) + 1)
    lines = [f" {line}" if line.lstrip().startswith("/") else line for line in part.text.split("\n")]
    return f"{fence}text\n" + "\n".join(lines) + f"\n{fence}"


def _adf_text(span: Span) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "text", "text": span.text}
    if span.href:
        node["marks"] = [{"type": "link", "attrs": {"href": span.href}}]
    elif span.literal:
        node["marks"] = [{"type": "code"}]
    return node
