"""Small edits to an existing repository: the engineer answers with search/replace blocks (whole files only for
new ones), and this package applies them, refuses them with a repair request for the model, and diffs them.

A leaf: no ORM, nothing of `lifecycle`. The answer's schema is `agents.schemas.edits.EditAnswer`. The lifecycle
side calls, in order:

    paths = named_paths(answer)                        # every path the answer names
    before = read_files(workspace, paths)              # bytes; Unreadable for links, directories; absent = new
    applied = apply_edits(before, answer)              # pure: Applied(changed, deleted, problems, reindented)
    if applied.ok:
        write applied.changed, remove applied.deleted  # the caller owns the disk and the commit
        patch = unified_diff(before, applied)          # git-style, `git apply` reads it

Repairs: a role whose context implements `CurrentFiles.current_files(paths)` (typically `read_files` on its
workspace) gets `EditAnswer` checked against it during validation (`check_answer`), so a block that matches no
place or several goes back to the model through the provider's bounded repair loop, with the nearest lines or
the line numbers of each match. `Applied.repair_request()` gives the same text for any other use.

The rules (docs/adr/0028-search-replace-edits.md): whole lines; each block must match exactly one place in the
file as it stands after the answer's earlier blocks; a uniform indentation difference is accepted and the replace
text shifted alike; line endings and a missing final newline are kept; Python that parsed must still parse;
binary, non-UTF-8 and over-large files, unsafe paths and `.git/` are refused; all or nothing.
"""
from agents.edits.apply import Answer, Applied, Files, Problem, apply_edits, named_paths
from agents.edits.check import CurrentFiles, EditsRefused, check_answer
from agents.edits.diff import unified_diff
from agents.edits.disk import read_files
from agents.edits.text import MAX_FILE_BYTES, Unreadable, path_problem

__all__ = ["MAX_FILE_BYTES", "Answer", "Applied", "CurrentFiles", "EditsRefused", "Files", "Problem", "Unreadable",
           "apply_edits", "check_answer", "named_paths", "path_problem", "read_files", "unified_diff"]
