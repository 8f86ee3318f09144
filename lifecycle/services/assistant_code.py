"""What the code guide reads (ADR 36): a requirement's code, searched and read within a token budget.

The code is read from git objects at a commit, never from the working tree, and nothing is checked out: a
question must not move a workspace an engineer step is writing. Which commit: the requirement's workspace at the
commit the database records (what was or will be delivered on its branch); on an existing repository whose
workspace is not on this machine, the mirror at the base commit the requirement branched from. A new project's
requirement that has not reached development has no code: the tool says so. Each function takes a requirement
the caller already found within the asker's organization.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from agents.repo import IndexTooLarge, RepoIndex, RepoIndexError, index_repository, repo_map, search
from agents.repo.budget import estimate_tokens
from agents.repo.excerpts import excerpt
from agents.repo.files import git
from lifecycle.models import Requirement
from lifecycle.services.repositories import mirror_for

READ_TOKENS = 2200  # a file or definition as the tool returns it: within assistant_tools.RESULT_MAX_CHARS
MAP_TOKENS = 700
HITS_SHOWN = 12
PATHS_SHOWN = 10


@dataclass(frozen=True)
class CodeSource:
    root: Path
    rev: str
    label: str


def code_source(requirement: Requirement) -> CodeSource | str:
    """Where the requirement's code is, or why there is none to read (the text is the tool's answer)."""
    workspace = Path(settings.AITEAM_WORKSPACE_ROOT) / str(requirement.pk)
    if (workspace / ".git").is_dir():
        rev = requirement.workspace_head or requirement.base_sha or "HEAD"
        what = "the base commit" if rev == requirement.base_sha else "its latest attempt"
        return CodeSource(workspace, rev, f"the requirement's workspace at {what}")
    if requirement.base_sha:
        mirror = mirror_for(requirement.project).path
        if mirror.is_dir():
            return CodeSource(mirror, requirement.base_sha, f"the project's repository at the base commit "
                              f"{requirement.base_sha[:10]}")
        return (f"'{requirement}' works on the project's repository, but neither its workspace nor the repository's "
                "mirror is on this machine yet: there is no code to read here")
    return (f"'{requirement}' has no code yet: it is a new project's requirement (state {requirement.state}) and no "
            "engineer has written to its workspace")


def code_search(requirement: Requirement, query: str) -> str:
    """The definitions that best match the query, and the files whose path names a word of it; with no match, the
    ranked map of the repository (within MAP_TOKENS) leaning towards the query."""
    found = _index(requirement)
    if isinstance(found, str):
        return found
    source, index = found
    words = [w.lower() for w in query.replace("/", " ").split() if len(w) > 2]
    paths = [p for p in sorted(index.paths) if any(w in p.lower() for w in words)][:PATHS_SHOWN]
    hits = search(index, query, limit=HITS_SHOWN) if query.strip() else []
    lines = [f"{source.label} (commit {index.sha[:10]}): {len(index.files)} files, {len(index.symbols)} definitions"]
    lines += [f"{h.path}:{h.line}-{h.end_line} {h.kind} {h.qualname}: {h.signature} (matched: {', '.join(h.matched_terms)})"
              for h in hits]
    lines += [f"file: {path}" for path in paths]
    if not hits and not paths:
        shown = repo_map(index, MAP_TOKENS, ticket=query)
        lines += ["nothing matched the query; the repository's map, best-ranked first:", shown.text]
    return "\n".join(lines)


def code_read(requirement: Requirement, path: str, symbol: str = "") -> str:
    """The file whole when it fits READ_TOKENS, else the definition asked for and the file's head; each part
    starts at a line number. A path that is not a file of the commit is refused with the nearest ones."""
    found = _index(requirement)
    if isinstance(found, str):
        return found
    source, index = found
    path = path.strip().removeprefix("./")
    if path not in index.paths:
        near = [p for p in sorted(index.paths) if p.endswith(Path(path).name)][:PATHS_SHOWN]
        return f"{path} is not a file of {source.label} (commit {index.sha[:10]}); files by that name: {near or 'none'}"
    text = git(source.root, "cat-file", "blob", f"{index.sha}:{path}").decode("utf-8", errors="replace")
    chunks = excerpt(path, text, READ_TOKENS, [symbol] if symbol else ())
    shown = sum(chunk.text.count("\n") for chunk in chunks)
    lines = [f"{path} in {source.label} (commit {index.sha[:10]}): {len(text.splitlines())} lines, about "
             f"{estimate_tokens(text)} tokens; {shown} lines shown"]
    names = [s.qualname for s in index.symbols_by_path.get(path, [])]
    if symbol and not any(n == symbol or n.rpartition(".")[2] == symbol for n in names):
        lines.append(f"no definition named {symbol} here; its definitions: {', '.join(names[:30]) or 'none'}")
    for chunk in chunks:
        lines += [f"--- from line {chunk.start_line} ---", chunk.text.rstrip("\n")]
    return "\n".join(lines)


def _index(requirement: Requirement) -> tuple[CodeSource, RepoIndex] | str:
    source = code_source(requirement)
    if isinstance(source, str):
        return source
    try:  # cached by commit next to the project's mirror, as the roles' repository contexts are
        return source, index_repository(source.root, Path(settings.AITEAM_MIRROR_ROOT) / f"{requirement.project_id}.index",
                                        rev=source.rev, max_total_bytes=settings.AITEAM_REPO_INDEX_MAX_MB * 1024**2)
    except IndexTooLarge as exc:
        return f"{source.label} cannot be shown: {exc}"
    except RepoIndexError:
        return f"{source.label} has no commit to read yet: there is no code to show"
