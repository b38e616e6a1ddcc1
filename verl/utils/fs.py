"""Local copies of remote files and directories (verl's ``verl.utils.fs``): ``copy_to_local(path)`` returns a local
path for ``path``.

A local path comes back unchanged. An ``hdfs://`` path is copied once into ``<cache_dir>/<md5 of the path>/<name>``
(``cache_dir`` defaults to the system temp dir) under a file lock, so several processes on a node copy it once; a
later call reuses the copy unless ``always_recopy``. A copied directory records its file list
(``.directory_record.txt``): a copy that lost files (an interrupted copy, a cleaned tmp) is copied again. HDFS is
reached through the ``hdfs`` command line (``hdfs dfs -get``), which must be on ``PATH``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile

__all__ = ["copy", "copy_to_local", "exists", "is_non_local", "makedirs", "md5_encode"]

_HDFS_PREFIX = "hdfs://"
RECORD_FILE = ".directory_record.txt"


def is_non_local(path: str) -> bool:
    """Whether ``path`` lives on HDFS (``hdfs://...``)."""
    return str(path).startswith(_HDFS_PREFIX)


def md5_encode(path: str) -> str:
    """Hex MD5 of ``path``: the cache folder name of its copy."""
    return hashlib.md5(path.encode()).hexdigest()


def _hdfs(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("hdfs") is None:
        raise FileNotFoundError(
            f"'hdfs {' '.join(args)}' needs the hdfs command line on PATH (install Hadoop's client), or copy the "
            "files to a local path and give that instead"
        )
    return subprocess.run(["hdfs", "dfs", *args], capture_output=True, text=True)


def exists(path: str) -> bool:
    """Whether ``path`` (local or ``hdfs://``) exists."""
    if is_non_local(path):
        return _hdfs("-test", "-e", path).returncode == 0
    return os.path.exists(path)


def makedirs(path: str, exist_ok: bool = True) -> None:
    """Create the directory ``path`` (local or ``hdfs://``) with its parents."""
    if is_non_local(path):
        result = _hdfs("-mkdir", "-p", path)
        if result.returncode:
            raise OSError(f"hdfs dfs -mkdir -p {path} failed: {result.stderr.strip()}")
    else:
        os.makedirs(path, exist_ok=exist_ok)


def copy(src: str, dst: str) -> None:
    """Copy a file or directory from ``src`` to ``dst``; either may be ``hdfs://``."""
    if is_non_local(src) or is_non_local(dst):
        verb = "-get" if is_non_local(src) and not is_non_local(dst) else "-put" if not is_non_local(src) else "-cp"
        result = _hdfs(verb, src, dst)
        if result.returncode:
            raise OSError(f"hdfs dfs {verb} {src} {dst} failed: {result.stderr.strip()}")
    elif os.path.isdir(src):
        shutil.copytree(src, dst)
    else:
        shutil.copy2(src, dst)


def _entries(folder: str) -> set[str]:
    out = set()
    for root, dirs, files in os.walk(folder):
        out.update(f"dir:{os.path.relpath(os.path.join(root, d), folder)}" for d in dirs)
        out.update(f"file:{os.path.relpath(os.path.join(root, f), folder)}" for f in files if f != RECORD_FILE)
    return out


def _record_directory_structure(folder_path: str | os.PathLike) -> str:
    """Write the list of ``folder_path``'s files and folders into it; returns the record's path."""
    record = os.path.join(folder_path, RECORD_FILE)
    entries = _entries(str(folder_path))
    with open(record, "w") as f:
        f.writelines(f"{e}\n" for e in sorted(entries))
    return record


def _check_directory_structure(folder_path: str | os.PathLike, record_file: str) -> bool:
    """Whether ``folder_path`` holds exactly the files and folders its record lists (False without a record)."""
    if not os.path.exists(record_file):
        return False
    with open(record_file) as f:
        recorded = set(f.read().splitlines())
    return _entries(str(folder_path)) == recorded


def copy_to_local(
    src: str,
    cache_dir: str | os.PathLike | None = None,
    filelock: str = ".file.lock",
    verbose: bool = False,
    always_recopy: bool = False,
    use_shm: bool = False,
) -> str:
    """A local path holding ``src`` (module docstring). ``use_shm``: the copy goes to ``/dev/shm`` (RAM) so several
    processes loading the same model read it from memory; ``filelock`` is accepted for verl's signature (the lock
    is named after the path)."""
    local = _cached_copy(src, cache_dir, verbose, always_recopy) if is_non_local(src) else src
    return _copy_to_shm(local) if use_shm else local


def _cached_copy(src: str, cache_dir, verbose: bool, always_recopy: bool) -> str:
    from filelock import FileLock

    src = src.rstrip("/")
    cache_dir = str(cache_dir) if cache_dir is not None else tempfile.gettempdir()
    folder = os.path.join(cache_dir, md5_encode(src))
    os.makedirs(folder, exist_ok=True)
    local = os.path.join(folder, os.path.basename(src))
    with FileLock(os.path.join(cache_dir, md5_encode(src) + ".lock")):
        stale = os.path.isdir(local) and not _check_directory_structure(local, os.path.join(local, RECORD_FILE))
        if os.path.exists(local) and (always_recopy or stale):
            shutil.rmtree(local, ignore_errors=True) if os.path.isdir(local) else os.remove(local)
        if not os.path.exists(local):
            if verbose:
                print(f"copying {src} to {local}")
            copy(src, local)
            if os.path.isdir(local):
                _record_directory_structure(local)
    return local


def _copy_to_shm(src: str) -> str:
    source = os.path.abspath(src)
    dst = os.path.join("/dev/shm/verl-cache", md5_encode(source), os.path.basename(source))
    if not os.path.exists(dst):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        copy(source, dst)
    return dst
