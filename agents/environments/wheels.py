"""Wheels written from files, with no index and no build backend.

Two uses: the runner's wheelhouse, which gives a repository that lacks pytest (or pytest-django, for a Django
``manage.py test``) the worker's own, repacked from the worker's installation (the version the runner's report
parsing is tested with, and no network needed); and small packages the tests make to install offline.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_UNREPACKED = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")  # written by the installer, not the wheel


def normalized(name: str) -> str:
    """A distribution name as wheel file names spell it (PEP 427 / 503)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def write_wheel(folder: Path, name: str, version: str, files: Mapping[str, bytes], *,
                requires: Iterable[str] = (), tag: str = "py3-none-any") -> Path:
    """A wheel of `files` (archive paths → bytes) in folder; METADATA and WHEEL are made unless given."""
    info = f"{normalized(name)}-{version}.dist-info"
    contents = dict(files)
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                *(f"Requires-Dist: {r}" for r in requires)]
    contents.setdefault(f"{info}/METADATA", ("\n".join(metadata) + "\n").encode())
    contents.setdefault(f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: aiteam\nRoot-Is-Purelib: true\n"
                                         f"Tag: {tag}\n".encode())
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in contents.items()]
    contents[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    target = folder / f"{normalized(name)}-{version}-{tag}.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return target


def repack_installed(folder: Path, names: Iterable[str]) -> list[Path]:
    """Wheels of the named installed distributions and of everything they require that is installed here.
    Extra wheels are harmless: pip installs only what the environment's markers ask for."""
    wheels = []
    pending, done = list(names), set()
    while pending:
        name = normalized(pending.pop())
        if name in done:
            continue
        done.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python (colorama on Windows): not needed here
        wheels.append(_repack(folder, dist))
        pending += [m.group(1) for r in dist.requires or [] if "extra ==" not in r and (m := _NAME.match(r))]
    return wheels


def runner_wheelhouse(cache_dir: Path, names: Iterable[str]) -> Path:
    """The runner's wheelhouse for `names` (pytest and the test command's plugins) under cache_dir, repacked from
    the worker's installation once per set of names and interpreter: made in a folder of its own, then renamed
    into place, so a concurrent step never reads a half-written one."""
    wanted = sorted({normalized(name) for name in names})
    digest = hashlib.sha256(f"{sys.version_info[:3]}:{','.join(wanted)}".encode()).hexdigest()[:16]
    folder = Path(cache_dir) / f"runner-wheels-{digest}"
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=".runner-wheels-", dir=folder.parent))
    repack_installed(staged, wanted)
    try:
        os.rename(staged, folder)
    except OSError:  # another worker put it in place first: theirs is as good
        shutil.rmtree(staged, ignore_errors=True)
    return folder


def _repack(folder: Path, dist: importlib.metadata.Distribution) -> Path:
    name, version = dist.metadata["Name"], dist.version
    wheel_info = dist.read_text("WHEEL") or ""
    if "Root-Is-Purelib: true" not in wheel_info:
        raise ValueError(f"{name} {version} is not pure Python; put a wheel of it in the runner's wheelhouse")
    tag = next((line.split(":", 1)[1].strip() for line in wheel_info.splitlines() if line.startswith("Tag:")),
               "py3-none-any")
    info = f"{normalized(name)}-{version}.dist-info"  # an older installer may have spelled it otherwise
    files = {}
    for entry in dist.files or []:
        path = entry.as_posix()
        if path.startswith("..") or "__pycache__" in path or path.rsplit("/", 1)[-1] in _UNREPACKED:
            continue  # scripts are made again from entry_points.txt; caches and install records are not the wheel's
        head, _, tail = path.partition("/")
        files[f"{info}/{tail}" if head.endswith(".dist-info") else path] = Path(str(dist.locate_file(entry))).read_bytes()
    return write_wheel(folder, name, version, files, tag=tag)


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
