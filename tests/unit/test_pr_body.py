"""The pull/merge request title and body: the ticket link per source, the scope and tests, untrusted text kept
literal, the size bound. Bodies are rendered by a CommonMark renderer (markdown-it-py, raw HTML on as GitHub and
GitLab allow it) to check what a reader would see, not what the string looks like."""
from __future__ import annotations

import re
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from agents.delivery.pr_body import (
    BODY_MAX_CHARS,
    Scope,
    SuiteCounts,
    SuiteResults,
    TicketRef,
    change_body,
    change_title,
    same_repository,
)
from agents.delivery.rich_text import ZERO_WIDTH_SPACE

RENDER = MarkdownIt("commonmark", {"html": True})
SCOPE = Scope(lines_added=10, lines_removed=2, modules=("shop",), files=("shop/cart.py",))
TESTS = SuiteResults(before=SuiteCounts(passed=40, failed=1), after=SuiteCounts(passed=42, failed=0),
                         base_commit="0123456789abcdef", fail_to_pass=("tests/test_cart.py::test_total",))
HOSTILE = ("Fixes #3 @alice <img src=x onerror=alert(1)> <!-- hidden --> [click](http://evil.example) "
           "![i](http://evil.example/i.png) <details>x</details> ``` ` https://evil.example/bare")


def body(ticket: TicketRef | None, host: str = "github", repository: str = "acme/shop", **kwargs) -> str:
    return change_body(host=host, repository=repository, ticket=ticket, scope=SCOPE, tests=TESTS, **kwargs)


def outside_code(markdown: str) -> str:
    """The rendered HTML with every code element's content removed: what is left is what renders as markup."""
    html = RENDER.render(markdown)
    return re.sub(r"<code[^>]*>.*?</code>", "<code/>", html, flags=re.DOTALL)


def test_a_github_issue_of_the_same_repository_is_fixed_by_the_pull_request():
    url = "https://github.com/acme/shop/issues/12"
    assert body(TicketRef("github", "#12", "Total", url, via_webhook=True)).startswith("Fixes #12\n")
    assert body(TicketRef("github", "#12", "Total", via_webhook=True)).startswith("Fixes #12\n")  # its own webhook


def test_a_members_ticket_naming_an_issue_is_linked_but_never_closes_it():
    """Posted over the API, not by the tracker's signed webhook: the member chose the key and the address."""
    for ticket in (TicketRef("github", "#12", "Total", "https://github.com/acme/shop/issues/12"),
                   TicketRef("github", "#12", "Total")):
        text = body(ticket)
        assert "Fixes" not in text and "Closes" not in text and text.startswith("Ticket (github): `#12`")


def test_an_issue_of_another_repository_is_linked_but_never_closed():
    text = body(TicketRef("github", "#12", "Total", "https://github.com/other/repo/issues/12"))

    assert "Fixes" not in text and "Closes" not in text
    assert text.startswith("Ticket (github): `#12`, [open the ticket](https://github.com/other/repo/issues/12)\n")


def test_a_gitlab_issue_is_closed_by_the_merge_request():
    url = "https://gitlab.com/acme/tools/shop/-/issues/12"
    issue = TicketRef("gitlab", "#12", "T", url, via_webhook=True)
    assert body(issue, host="gitlab", repository="acme/tools/shop").startswith("Closes #12\n")
    assert not body(issue, host="github").startswith(("Closes", "Fixes"))


def test_a_jira_ticket_is_named_by_key_and_address_and_heads_the_title():
    text = body(TicketRef("jira", "PROJ-7", "Total is wrong", "https://acme.atlassian.net/browse/PROJ-7"))

    assert text.startswith("Jira: `PROJ-7`, [open the ticket](https://acme.atlassian.net/browse/PROJ-7)\n")
    assert change_title(TicketRef("jira", "PROJ-7", "Total is wrong"), "x") == "PROJ-7: Total is wrong"


def test_a_ticket_address_that_could_break_out_of_its_link_or_carry_a_user_is_not_linked():
    for url in ("https://x.example/a)(javascript:alert(1)", "javascript:alert(1)", "https://x.example/a b",
                "https://token@x.example/a", "https://x.example/@alice"):
        text = body(TicketRef("api", "T-1", "t", url))
        assert text.startswith("Ticket (api): `T-1`\n") and "javascript" not in text and "@" not in text, url


def test_the_scope_and_the_tests_before_and_after_are_listed():
    text = body(None, branch="aiteam/12-total")

    assert text.startswith("No ticket: this change comes from a brief.")
    for line in ("- 12 lines changed (+10 −2) in 1 files, 1 top-level modules: `shop`", "- branch `aiteam/12-total`",
                 "- files: `shop/cart.py`", "- within limits", "- before (at 0123456789ab): 40 passed, 1 failed",
                 "- after: 42 passed, 0 failed", "- fail-to-pass (1): `tests/test_cart.py::test_total`"):
        assert line in text.splitlines(), line


def test_flags_newly_failing_tests_and_a_repository_without_tests_are_said():
    tests = SuiteResults(after=SuiteCounts(passed=3, failed=1, errors=2, skipped=1), newly_failing=("t::a",))
    scope = Scope(lines_added=400, lines_removed=0, modules=("a", "b", "c"), flags=("over 300 lines", "CI file"))
    text = change_body(host="github", repository="acme/shop", ticket=None, scope=scope, tests=tests)

    assert "- needs a person's decision: `over 300 lines`, `CI file`" in text
    assert "- before: no tests ran" in text and "- after: 3 passed, 1 failed, 2 errors, 1 skipped" in text
    assert "- newly failing (1): `t::a`" in text


def test_untrusted_text_pings_nobody_links_nothing_and_hides_nothing():
    text = body(TicketRef("github", "#12", HOSTILE), summary=f"{HOSTILE}\n\n/close\n/assign @bob\n````\n@carol")
    markup = outside_code(text)

    assert re.findall(r"<a href=\"([^\"]*)\"", markup) == []  # "Fixes #12" is GitHub's keyword, not a link here
    for leaked in ("@alice", "@bob", "@carol", "<img", "<!--", "<details", "evil.example", "#3"):
        assert leaked not in markup, leaked
    assert not any(line.startswith("/") for line in text.splitlines())  # no GitLab quick action
    assert "Ticket: " in text and HOSTILE.replace("  ", " ") in RENDER.render(text).replace("&lt;", "<").replace(
        "&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")  # shown in full, as written


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("`@#<>![]()/\\\n -*_~|:ab1")), max_size=80))
def test_no_text_escapes_its_code_span_or_block(untrusted):
    text = change_body(host="gitlab", repository="acme/shop", ticket=TicketRef("api", "K-1", untrusted),
                       summary=untrusted, scope=Scope(lines_added=1, lines_removed=0, files=(untrusted or "f",)),
                       tests=TESTS)
    markup = outside_code(text)

    assert "<a " not in markup and "<img" not in markup and "@a" not in markup and "<em>" not in markup
    assert not any(line.startswith("/") for line in text.splitlines())  # GitLab reads /commands at a line start


def test_the_body_stays_under_the_bound_however_large_the_inputs():
    many = tuple(f"tests/test_{i}.py::test_{'x' * 300}" for i in range(5_000))
    tests = SuiteResults(after=SuiteCounts(passed=0, failed=5_000), fail_to_pass=many, newly_failing=many)
    text = change_body(host="github", repository="acme/shop", ticket=TicketRef("github", "#1", "t" * 100_000),
                       scope=Scope(lines_added=10**6, lines_removed=0, modules=many, files=many, flags=many),
                       tests=tests, summary="s" * 1_000_000)

    assert len(text) <= BODY_MAX_CHARS
    assert "- fail-to-pass (5000): " in text and " and 4980 more" in text
    assert "…" in text  # the title, each name and the summary were cut, visibly


def test_a_gitlab_project_named_by_its_id_knows_its_issues_by_the_id_their_webhook_carried():
    """docs: settings["gitlab"]["project"] may be the project's numeric id; the issue's address names its path."""
    own = TicketRef(source="gitlab", key="#23", url="https://gitlab.com/acme/wordcount/-/issues/23", via_webhook=True,
                    repository_id="1")
    assert same_repository("gitlab", "1", own) and same_repository("gitlab", "acme/wordcount", own)
    assert not same_repository("gitlab", "2", own)
    assert not same_repository("gitlab", "1", replace(own, repository_id=""))  # a member's ticket: not known
    body = change_body(host="gitlab", repository="1", ticket=own, scope=Scope(1, 0),
                       tests=SuiteResults(after=SuiteCounts(1, 0)))
    assert body.startswith("Closes #23")


def test_a_title_cannot_mention_reference_or_carry_control_characters():
    hostile = "Fix #3 for @alice, !4 and ~bug\n\x1b[31m\u202eev\u200bil\u200e\x85end"  # bidi, zero-width, C1
    title = change_title(TicketRef("github", "#12", hostile), "x")

    z = ZERO_WIDTH_SPACE  # its own, after each reference sign; the ticket's were dropped
    assert title == f"Fix #{z}3 for @{z}alice, !{z}4 and ~{z}bug [31mevil end"
    assert change_title(None, "Deliver aiteam/x") == "Deliver aiteam/x"
    assert change_title(None, "Closes https://gitlab.com/a/b/-/issues/3") == f"Closes https:{z}//gitlab.com/a/b/-/issues/3"
    assert len(change_title(TicketRef("api", "k", "t" * 999), "x")) == 250
