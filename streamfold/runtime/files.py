"""Atomic file operations: a reader sees a file or directory whole, or not at all."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from typing import Any


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (hidden temp file, fsync, rename)."""
    parent = os.path.dirname(path) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(parent)


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def temp_dir_for(final: str) -> str:
    """A hidden sibling of ``final`` to write into before renaming it into place."""
    parent = os.path.dirname(final) or "."
    os.makedirs(parent, exist_ok=True)
    return os.path.join(parent, f".tmp-{os.path.basename(final)}-{uuid.uuid4().hex[:8]}")


def publish_dir(tmp: str, final: str) -> None:
    """Move a fully written directory into place, replacing a stale one from a crashed attempt."""
    if os.path.exists(final):
        shutil.rmtree(final)
    os.rename(tmp, final)
    fsync_dir(os.path.dirname(final) or ".")


def remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)


def remove_temps(directory: str) -> None:
    """Delete leftovers of interrupted writes (hidden ``.tmp-*`` entries) in ``directory``."""
    if not os.path.isdir(directory):
        return
    for name in os.listdir(directory):
        if name.startswith(".tmp-") or (name.startswith(".") and name.endswith(".tmp")):
            remove(os.path.join(directory, name))
