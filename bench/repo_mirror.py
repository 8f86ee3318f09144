"""The project mirror and a requirement's workspace on a real large repository available offline: the installed
Django package's source, made a bare repository of one commit under a local root. Measures the first sync (the
mirror created and fetched), a sync with nothing new, opening a workspace (clone from the mirror, branch, check
out), aligning it back to the base, and what each workspace adds on disk beyond the mirror's hard-linked objects.

    python bench/repo_mirror.py [--workspaces 3]

No database, broker or network.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agents.delivery.remotes import Remote  # noqa: E402
from agents.repo.mirror import Mirror  # noqa: E402
from agents.repo.workspace import RepoWorkspace  # noqa: E402
from bench._report import print_machine  # noqa: E402

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@localhost", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "PATH": "/usr/bin:/bin"}


def origin_of_django(tmp: Path) -> tuple[Path, int]:
    source = tmp / "src"
    shutil.copytree(Path(django.__file__).parent, source, ignore=shutil.ignore_patterns("__pycache__"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "import"]):
        subprocess.run(["git", *args], cwd=source, env=GIT_ENV, check=True)
    origin = tmp / "remotes" / "org" / "project.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(origin)], env=GIT_ENV, check=True)
    files = subprocess.run(["git", "ls-files"], cwd=source, env=GIT_ENV, check=True, capture_output=True, text=True)
    return origin, len(files.stdout.splitlines())


def timed(action, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    value = action(*args, **kwargs)
    return time.perf_counter() - start, value


def disk_bytes(path: Path) -> int:
    """Bytes of files with no other hard link: what this directory adds beyond what it shares."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and p.stat().st_nlink == 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workspaces", type=int, default=3)
    args = parser.parse_args()
    print_machine()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        origin, files = origin_of_django(tmp)
        mirror = Mirror(tmp / "mirrors" / "project.git", Remote(str(origin), local_root=tmp / "remotes",
                                                                own_path="org/project.git"))

        def sync() -> None:
            with mirror.locked():
                mirror.sync("main")

        print(f"repository: django {django.__version__}, {files} files")
        print(f"first sync (create + fetch): {timed(sync)[0]:.2f} s; with nothing new: {timed(sync)[0]:.3f} s")
        opened, aligned, added = [], [], []
        for n in range(args.workspaces):
            seconds, workspace = timed(RepoWorkspace.open, mirror, tmp / "ws" / str(n), branch=f"aiteam/{n}-bench",
                                       base="main")
            opened.append(seconds)
            aligned.append(timed(workspace.align, "")[0])
            added.append(disk_bytes(workspace.path / ".git") / 1e6)
        print(f"open workspace: median {statistics.median(opened):.2f} s; align to base: median "
              f"{statistics.median(aligned):.2f} s")
        mirror_mb = sum(p.stat().st_size for p in mirror.path.rglob("*") if p.is_file()) / 1e6
        print(f"mirror {mirror_mb:.1f} MB; each workspace's .git adds {statistics.median(added):.1f} MB (objects are "
              "hard-linked)")


if __name__ == "__main__":
    main()
