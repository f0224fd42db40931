"""Writes a snapshot counts on: a Bytewax snapshot records that captures are in the spool, and
a window's row that its container is in the blob store, so those bytes must be on disk when
the write returns. A file's bytes are fsynced, and so is the directory that gained a new name
(without it a crash can keep the bytes and lose the name).
"""

from __future__ import annotations

import os

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def sync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory: the names made or replaced in it are on disk."""
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: str | os.PathLike[str]) -> None:
    """``os.makedirs`` whose new directories are on disk: each one's parent is synced."""
    missing = []
    here = os.fspath(path)
    while not os.path.isdir(here):
        missing.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    os.makedirs(path, exist_ok=True)
    for made in reversed(missing):
        sync_dir(os.path.dirname(made) or ".")
