"""Atomic file output: a file is either written whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> Path:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename.

    The temporary file is created with ``mode`` from the start (so a secret key
    is never readable by others, even briefly) and removed on any failure, so a
    failed command leaves no partial output file.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, mode: int = 0o644) -> Path:
    """Serialize ``obj`` as indented JSON and write it atomically."""
    return atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode(), mode=mode)
