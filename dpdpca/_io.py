"""File input and output with one-line errors.

Output is atomic: a file is either written whole or not at all.  Input is
bounded: a file is refused before it is read if it is larger than the caller's
limit, and a JSON file that is not JSON (or is nested deeper than the parser
allows) is refused with one line, never a traceback.  Every failure is a
:class:`~dpdpca.errors.DpdpcaError` (``FileAccessError`` for the file system,
``MessageError`` for content).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpdpca.errors import FileAccessError, MessageError

#: Default size limit of a JSON file (keys, parameters, identities, ledgers).
MAX_JSON_BYTES = 1 << 20


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644,
                       exclusive: bool = False) -> Path:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename.

    The temporary file is created with ``mode`` from the start (so a secret key
    is never readable by others, even briefly) and removed on any failure, so a
    failed command leaves no partial output file.  With ``exclusive=True`` the
    final step is a hard link, which fails if ``path`` exists (no overwrite,
    even by a concurrent writer).

    Raises
    ------
    FileAccessError
        The directory cannot be created or written, or (``exclusive``) the
        target exists.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise FileAccessError(f"output file {str(target)!r} must be writable, got {type(exc).__name__}: "
                              f"{exc.strerror or exc}") from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive:
            os.link(tmp, target)
            os.unlink(tmp)
        else:
            os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, FileExistsError):
            raise FileAccessError(f"output file {str(target)!r} must not exist already, got an existing file") \
                from None
        if isinstance(exc, OSError):
            raise FileAccessError(f"output file {str(target)!r} must be writable, got {type(exc).__name__}: "
                                  f"{exc.strerror or exc}") from None
        raise
    return target


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, mode: int = 0o644,
                      exclusive: bool = False) -> Path:
    """Serialize ``obj`` as indented JSON and write it atomically."""
    return atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode(), mode=mode,
                              exclusive=exclusive)


def read_bytes_file(path: str | os.PathLike[str], what: str, *, max_bytes: int | None = None) -> bytes:
    """The bytes of ``path``, refused before reading if larger than ``max_bytes``.

    Raises
    ------
    FileAccessError
        Missing, not a regular file, unreadable, or larger than ``max_bytes``.
    """
    p = Path(path)
    try:
        if not p.is_file():
            raise FileAccessError(f"{what} file {str(p)!r} must exist, got no such file")
        size = p.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise FileAccessError(f"{what} file {str(p)!r} must be at most {max_bytes} bytes, got {size}")
        return p.read_bytes()
    except FileAccessError:
        raise
    except OSError as exc:
        raise FileAccessError(f"{what} file {str(p)!r} must be readable, got {type(exc).__name__}: "
                              f"{exc.strerror or exc}") from None


def parse_json_bytes(data: bytes, what: str) -> Any:
    """Parse UTF-8 JSON; any failure (including nesting too deep for the parser) is one line.

    Raises
    ------
    MessageError
        Not UTF-8, not JSON, or nested too deeply.
    """
    try:
        return json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise MessageError(f"{what} must be JSON, got {type(exc).__name__}") from None


def read_json_file(path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Read and parse a bounded JSON file (see :func:`read_bytes_file`, :func:`parse_json_bytes`)."""
    return parse_json_bytes(read_bytes_file(path, what, max_bytes=max_bytes), f"{what} file {str(path)!r}")


@contextmanager
def exclusive_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (a sidecar lock file, created 0600) for the ``with`` block.

    Serializes read-check-write sequences of several processes on one file
    (POSIX; elsewhere the block runs unlocked).
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX platforms
        yield
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
