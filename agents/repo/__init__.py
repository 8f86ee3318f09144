"""An index of an existing git repository, for finding the code a ticket is about (issue 23, part 5).

The public API (a leaf: no ORM, nothing of `lifecycle`):

    index = index_repository(checkout, cache_dir=settings_dir / "repo-index")    # RepoIndex of HEAD
    view = repo_map(index, budget_tokens=4000, ticket=ticket_text)              # RepoMap
    hits = search(index, "paginator page out of range", limit=10)              # list[SearchHit]

- `index_repository(root, cache_dir, rev="HEAD", max_file_bytes=512 KiB)` reads the files of commit `rev` from
  git (tracked files only; binaries, files over the limit, symlinks, submodules and names that cannot travel as
  text are listed in `index.skipped` with the reason, and `index.files_note()` says so in one line), parses
  Python with `ast` into classes, functions and methods (`index.symbols`: path, qualname, kind, line range,
  one-line signature) and the names each file uses. It is cached under `cache_dir` by commit
  SHA: a second call for the same commit loads it (`index.from_cache`).
- `repo_map(index, budget_tokens, ticket="", focus_paths=())` ranks files and definitions (personalised PageRank
  over who uses what, leaning towards what the ticket names) and renders the best of them within the budget:
  `view.text` always has `estimate_tokens(view.text) <= budget_tokens`; `view.entries` says for each line its
  score and why (named in the ticket, used by N files); `view.focus` says what in the ticket steered it.
- `search(index, query, limit=10)` is BM25 over definitions with identifier-aware terms; each `SearchHit` has its
  score and the query terms it matched.
- `estimate_tokens(text)` is the conservative estimate every budget here is held to (see `budget.py`).

Ticket text is untrusted: it only reorders what the index already holds. A path in it is matched against the
commit's file list, never opened, and nothing here reads the working tree, so no text can reach a file outside
the repository. Errors the caller can act on raise `RepoIndexError` (not a repository, unknown revision, a focus
path that is not in the commit; `IndexTooLarge`, a commit with more Python source than `max_total_bytes`, 256 MiB)
or `ValueError` (a negative budget, a limit out of range).
"""
from __future__ import annotations

from agents.repo.budget import estimate_tokens
from agents.repo.files import IndexTooLarge, RepoIndexError, Skipped
from agents.repo.index import FileInfo, RepoIndex, index_repository
from agents.repo.rank import Focus
from agents.repo.repomap import MapEntry, RepoMap, repo_map
from agents.repo.search import SearchHit
from agents.repo.symbols import Symbol


def search(index: RepoIndex, query: str, limit: int = 10) -> list[SearchHit]:
    return index.searcher.search(query, limit)


__all__ = ["FileInfo", "Focus", "IndexTooLarge", "MapEntry", "RepoIndex", "RepoIndexError", "RepoMap", "SearchHit",
           "Skipped", "Symbol", "estimate_tokens", "index_repository", "repo_map", "search"]
