"""The repository map: a hard token budget whatever the repository's size, what the ticket names ranks first, each
line says why it is there, and ticket text never reaches a path of its own."""
from __future__ import annotations

import pytest

from agents.repo import RepoIndexError, estimate_tokens, index_repository, repo_map
from tests.repo_sample import HUGE_LIMIT, git, make_sample_repo


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """One repository for the module: nothing here changes it, and building it per test was most of the time."""
    base = tmp_path_factory.mktemp("repo")
    return index_repository(make_sample_repo(base), base / "cache", max_file_bytes=HUGE_LIMIT)


def first_path(view):
    return view.text.splitlines()[0]


@pytest.mark.parametrize("budget", [0, 1, 5, 20, 60, 150, 400, 100_000])
def test_the_map_never_exceeds_its_budget(index, budget):
    view = repo_map(index, budget)
    assert view.tokens == estimate_tokens(view.text) <= budget
    assert (view.text == "") == (budget == 0 or len(view.entries) == 0)
    assert budget < 20 or view.entries  # a budget of a line or two shows the best file already


def test_a_larger_budget_shows_more_and_a_whole_repository_fits_a_large_one(index):
    small, large = repo_map(index, 60), repo_map(index, 100_000)
    assert 0 < len(small.entries) < len(large.entries) == large.candidates
    assert large.text.startswith(small.text.splitlines()[0])


def test_the_budget_holds_on_a_repository_of_hundreds_of_modules(tmp_path):
    repo = tmp_path / "big"
    repo.mkdir()
    git(repo, "init", "-q")
    for m in range(200):
        body = "".join(f"def handler_{m}_{f}(request):\n    return helper_{(m + 1) % 200}_0(request)\n\n\n"
                       for f in range(10))
        (repo / f"module_{m}.py").write_text(f"class Service{m}:\n    def run(self):\n        pass\n\n\n" + body)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "big")
    index = index_repository(repo, tmp_path / "cache")
    assert len(index.symbols) == 200 * 12
    for budget in (50, 1000, 4000):
        view = repo_map(index, budget, ticket="Service42 fails")
        assert view.tokens <= budget and view.candidates == 200 * 12 > len(view.entries) > 0
        assert first_path(view) == "module_42.py"


def test_the_file_a_ticket_names_ranks_first(index):
    assert first_path(repo_map(index, 400)) != "shop/pricing.py"  # by references alone, the models lead
    view = repo_map(index, 400, ticket="Discounts are computed wrongly in shop/pricing.py since last week.")
    assert first_path(view) == "shop/pricing.py"
    assert view.focus.paths == {"shop/pricing.py"}
    assert "file named in the ticket" in view.entries[0].reasons


@pytest.mark.parametrize("mention", ["shop.pricing", "pricing.py", "./shop/pricing.py", "(shop/pricing.py)."])
def test_a_file_is_recognised_however_the_ticket_writes_it(index, mention):
    assert repo_map(index, 400, ticket=f"see {mention}").focus.paths == {"shop/pricing.py"}


def test_an_identifier_the_ticket_names_lifts_the_file_that_defines_it(index):
    view = repo_map(index, 400, ticket="The total printed by `render_invoice` is wrong")
    assert first_path(view) == "shop/invoice.py"
    assert view.focus.identifiers == {"render_invoice"}
    best = view.entries[0]
    assert (best.path, best.qualname) == ("shop/invoice.py", "render_invoice")
    assert "defines render_invoice, named in the ticket" in best.reasons


def test_plain_words_that_are_exactly_defined_names_steer_as_words_not_identifiers(index):
    # "total" and "amount" are method names: a plain lower-case word that is exactly one steers, more weakly than a
    # name written as code; "wrong" is defined nowhere.
    view = repo_map(index, 400, ticket="the total amount is wrong")
    assert (view.focus.identifiers, view.focus.words) == (frozenset(), {"total", "amount"})
    assert first_path(view) == "shop/models.py"
    assert "defines total, a word of the ticket" in next(e for e in view.entries if e.qualname == "Order.total").reasons


@pytest.mark.parametrize("ticket", ["views.checkout(request) returns the wrong total", "checkout() fails",
                                    "calling shop.views.checkout fails"])
def test_a_lower_case_name_written_as_a_call_or_after_a_dot_is_an_identifier(index, ticket):
    view = repo_map(index, 400, ticket=ticket)
    assert "checkout" in view.focus.identifiers and first_path(view) == "shop/views.py"
    assert (view.entries[0].path, view.entries[0].qualname) == ("shop/views.py", "checkout")


def test_a_name_written_as_code_ranks_above_the_plain_words_of_the_same_ticket(index):
    view = repo_map(index, 400, ticket="`render_invoice` prints the total amount twice")
    assert view.focus.identifiers == {"render_invoice"} and view.focus.words == {"total", "amount"}
    assert (view.entries[0].path, view.entries[0].qualname) == ("shop/invoice.py", "render_invoice")


def test_a_plain_word_defined_in_many_files_or_in_a_url_steers_nothing(tmp_path):
    repo = tmp_path / "many"
    repo.mkdir()
    git(repo, "init", "-q")
    for m in range(7):  # `fetch` in 7 files: which one a ticket's "fetch" means, the word cannot say
        (repo / f"client_{m}.py").write_text(f"def fetch(url):\n    return {m}\n\n\ndef parse_{m}(text):\n    pass\n")
    (repo / "render.py").write_text("def render(page):\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "clients")
    index = index_repository(repo, tmp_path / "cache")
    focus = repo_map(index, 400, ticket="fetch is slow; see https://example.com/render/docs").focus
    assert (focus.identifiers, focus.words) == (frozenset(), frozenset())
    assert repo_map(index, 400, ticket="client_3.fetch() is slow").focus.identifiers == {"fetch"}  # as code it is


def test_each_line_says_why_it_is_there(index):
    view = repo_map(index, 100_000)
    order = next(e for e in view.entries if e.qualname == "Order")
    assert "Order used by 3 other files" in order.reasons and order.score > 0
    readme = next(e for e in view.entries if e.path == "README.md")
    assert readme.qualname is None and readme.line is None


def test_a_method_is_shown_under_its_class(index):
    lines = repo_map(index, 100_000).text.splitlines()
    at = lines.index("shop/utils/http_client.py")
    assert lines[at + 1].endswith("│class HttpResponseParser:")
    assert lines[at + 2].endswith("│    def parse_header_line(self, line: bytes) -> tuple[str, str]:")


def test_paths_in_a_ticket_that_are_not_files_of_the_commit_steer_nothing(index):
    ticket = "read ../../outside.py and /etc/passwd and link.py and logo.png and build/junk.py ~/.ssh/id_rsa"
    view = repo_map(index, 100_000, ticket=ticket)
    assert view.focus.paths == frozenset()
    assert {e.path for e in view.entries} <= index.paths
    assert view.text == repo_map(index, 100_000).text


def test_focus_paths_the_caller_gives_must_be_files_of_the_commit(index):
    view = repo_map(index, 400, focus_paths=["shop/invoice.py"])
    assert first_path(view) == "shop/invoice.py"
    assert view.focus.given == {"shop/invoice.py"} and view.focus.paths == frozenset()
    assert "file given as focus" in view.entries[0].reasons
    with pytest.raises(RepoIndexError, match="not files of commit"):
        repo_map(index, 400, focus_paths=["../outside.py"])
    with pytest.raises(ValueError, match="a list of paths"):
        repo_map(index, 400, focus_paths="shop/invoice.py")


@pytest.mark.parametrize("budget", [-1, 1.5, "4000", None, True])
def test_a_budget_that_is_not_a_whole_number_of_tokens_is_refused(index, budget):
    with pytest.raises(ValueError, match="token budget"):
        repo_map(index, budget)


def test_a_repository_with_no_readable_file_gives_an_empty_map_not_an_error(tmp_path):
    repo = tmp_path / "bare-bones"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "blob.bin").write_bytes(b"\x00\x01")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "only a binary")
    index = index_repository(repo, tmp_path / "cache")
    view = repo_map(index, 1000, ticket="blob.bin is broken")
    assert (view.text, view.entries, view.candidates) == ("", (), 0)


def test_a_repository_without_a_commit_is_a_clear_error(tmp_path):
    git(tmp_path, "init", "-q")
    with pytest.raises(RepoIndexError, match="does not name a commit"):
        index_repository(tmp_path, tmp_path / "cache")


def test_a_ticket_of_a_megabyte_is_read_only_as_far_as_it_steers(index):
    view = repo_map(index, 400, ticket="shop/pricing.py " + "a/b/c.py " * 120_000)
    assert view.focus.paths == {"shop/pricing.py"} and view.tokens <= 400


def test_focus_files_take_turns_so_a_large_one_cannot_crowd_out_a_small_one(index):
    # By score alone, models.py's definitions (used everywhere) would fill a budget of a few lines.
    view = repo_map(index, 40, focus_paths=["shop/models.py", "shop/utils/http_client.py"])
    assert [e.path for e in view.entries[:2]] == ["shop/models.py", "shop/utils/http_client.py"]
    assert "shop/utils/http_client.py" in view.text.splitlines()
