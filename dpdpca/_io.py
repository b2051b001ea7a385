"""File input and output with one-line errors.

Output is atomic: a file is either written whole or not at all; a command
whose work cannot be repeated reserves its output first
(:class:`ReservedOutput`), so a path it cannot write is refused before the
work.  Input is
bounded: a file is refused before it is read if it is larger than the caller's
limit, and a JSON file that is not JSON (or is nested deeper than the parser
allows) is refused with one line, never a traceback.  Every failure is a
:class:`~dpdpca.errors.DpdpcaError` (``FileAccessError`` for the file system,
``MessageError`` for content).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpdpca.errors import FileAccessError, MessageError

#: Default size limit of a JSON file (keys, parameters, identities, ledgers).
MAX_JSON_BYTES = 1 << 20


class ReservedOutput:
    """An output file whose temporary file is made now and renamed into place by :meth:`write`, later.

    A command whose work cannot be repeated (a session's one release, a budget
    spent in a ledger) reserves its output *before* the work: making the
    temporary file beside ``path`` proves the directory exists (it is made if
    missing) and is writable, so a mistyped or unwritable path is refused in
    one line while nothing has been spent.  The write itself stays atomic
    (temporary file, fsync, rename).  What a reservation cannot promise: the
    disk may still fill up before :meth:`write`.

    The temporary file, and the directories made for it, are removed by
    :meth:`discard` (the ``with`` block's exit): a failed command leaves no
    partial output file (a process killed with SIGKILL leaves its
    ``.<name>.*.tmp``).

    Parameters
    ----------
    path : path-like
        The output file.
    mode : int
        Its permissions, from the start (a secret is never readable by others).
    exclusive : bool
        Refuse an existing ``path`` (now, and at the final hard link, so a
        concurrent writer cannot be overwritten either).
    what : str
        The output's name in errors (a command passes its option, ``"--out"``).

    Raises
    ------
    FileAccessError
        ``path`` is a directory, lies under a file, cannot be written, or
        (``exclusive``) exists.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp, ReservedOutput(Path(tmp) / "out.bin") as out:
    ...     out.write(b"result").read_bytes()    # after the work
    b'result'
    """

    def __init__(self, path: str | os.PathLike[str], *, mode: int = 0o644, exclusive: bool = False,
                 what: str = "output file") -> None:
        self.path = Path(path)
        self.what = what
        self._exclusive = exclusive
        self._tmp: str | None = None
        self._fd: int | None = None
        target = self.path
        self._made: list[Path] = []  # the directories made for it, innermost first: removed again by discard
        check_output_path(target, what, exclusive=exclusive)
        try:
            self._made = _make_parents(target)
            # kept open until the write: the bytes go to this file, whatever the name points to meanwhile
            self._fd, self._tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            os.fchmod(self._fd, mode)
        except OSError as exc:
            self.discard()
            raise FileAccessError(f"{what} {str(target)!r} must be writable, got {type(exc).__name__}: "
                                  f"{exc.strerror or exc}") from None

    def __enter__(self) -> ReservedOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def write(self, data: bytes) -> Path:
        """Write ``data`` to the temporary file and rename it to :attr:`path` (once).

        Raises
        ------
        FileAccessError
            The write or the rename failed (the temporary file is removed), or
            (``exclusive``) :attr:`path` appeared meanwhile.
        ValueError
            Called a second time, or after :meth:`discard`.
        """
        tmp, fd, target = self._tmp, self._fd, self.path
        if tmp is None or fd is None:
            raise ValueError(f"{self.what} {str(target)!r} must be written once, got a second write")
        try:
            self._fd = None  # the file object below closes it
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            if self._exclusive:
                os.link(tmp, target)
                os.unlink(tmp)
            else:
                os.replace(tmp, target)
            self._tmp, self._made = None, []
        except BaseException as exc:
            self.discard()
            if isinstance(exc, FileExistsError):
                raise FileAccessError(f"{self.what} {str(target)!r} must not exist already, got an existing "
                                      f"file") from None
            if isinstance(exc, OSError):
                raise FileAccessError(f"{self.what} {str(target)!r} must be writable, got {type(exc).__name__}: "
                                      f"{exc.strerror or exc}") from None
            raise
        return target

    def write_json(self, obj: Any) -> Path:
        """:meth:`write` ``obj`` as indented JSON (as :func:`atomic_write_json`)."""
        return self.write((json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())

    def discard(self) -> None:
        """Remove the temporary file, and the directories made for it, if it was not written (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        made, self._made = self._made, []
        _remove_dirs(made)


def check_output_path(path: str | os.PathLike[str], what: str, *, exclusive: bool = False) -> Path:
    """Refuse, without creating anything, an output path that cannot be a file: one line naming ``what``.

    Raises
    ------
    FileAccessError
        ``path`` is a directory, lies under something that is not a directory,
        or (``exclusive``) exists.
    """
    target = Path(path)
    if target.is_dir():
        raise FileAccessError(f"{what} {str(target)!r} must be a file, got a directory")
    if exclusive and (target.exists() or target.is_symlink()):
        raise FileAccessError(f"{what} {str(target)!r} must not exist already, got an existing file")
    for parent in target.parents:  # the nearest that exists must be a directory (one stat each: no race with
        try:                       # a directory removed between two tests)
            is_dir = stat.S_ISDIR(os.stat(parent).st_mode)
        except FileNotFoundError:
            if not parent.is_symlink():
                continue  # missing: made later
            is_dir = False  # a dangling symlink
        except NotADirectoryError:
            continue  # a file further up: found as this loop goes on
        if not is_dir:
            raise FileAccessError(f"{what} {str(target)!r} must be in a directory, got {str(parent)!r}, "
                                  f"which is not a directory")
        break
    return target


def _make_parents(target: Path) -> list[Path]:
    """Make ``target``'s missing directories; returns those made, innermost first (for :func:`_remove_dirs`)."""
    made = [p for p in target.parents if not (p.exists() or p.is_symlink())]
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        _remove_dirs(made)
        raise
    return made


def _remove_dirs(made: list[Path]) -> None:
    """Remove directories made by :func:`_make_parents`, innermost first, while they are empty."""
    for directory in made:
        try:
            directory.rmdir()
        except OSError:  # not empty (something else was written there meanwhile), or gone: left as it is
            break


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644,
                       exclusive: bool = False, what: str = "output file") -> Path:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename.

    The temporary file is created with ``mode`` from the start (so a secret key
    is never readable by others, even briefly) and removed on any failure, so a
    failed command leaves no partial output file.  With ``exclusive=True`` the
    final step is a hard link, which fails if ``path`` exists (no overwrite,
    even by a concurrent writer).  A command that must know the output is
    writable before it does its work reserves it first (:class:`ReservedOutput`).

    Raises
    ------
    FileAccessError
        The directory cannot be created or written, or (``exclusive``) the
        target exists.
    """
    with ReservedOutput(path, mode=mode, exclusive=exclusive, what=what) as out:
        return out.write(data)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, mode: int = 0o644,
                      exclusive: bool = False, what: str = "output file") -> Path:
    """Serialize ``obj`` as indented JSON and write it atomically."""
    with ReservedOutput(path, mode=mode, exclusive=exclusive, what=what) as out:
        return out.write_json(obj)


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
def exclusive_lock(path: str | os.PathLike[str], *, what: str = "locked file") -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock``, the sidecar lock file of ``path``, for the ``with`` block.

    Serializes read-check-write sequences of several processes on the file
    ``path`` (POSIX; elsewhere the block runs unlocked).  The lock file
    (mode 0600) is made, with any missing directory, on entry.

    Beside a ``path`` that exists when the block ends the lock file stays (by
    design: a lock file removed while another process waits on it would let a
    third lock a new one at the same time).  Where ``path`` still does not
    exist (nothing was written: a refused command), the holder removes the lock
    file, and the directories made for it, before it unlocks; a process that
    waited on the removed file finds it is no longer the one at its path and
    locks the new one, so exclusion holds all the same.  A refused command
    leaves nothing behind (under concurrent refusals on a new path, an empty
    directory may remain: one holder made it, another's lock file was in it).

    Raises
    ------
    FileAccessError
        ``path`` is a directory or lies under a file, or the lock file cannot
        be made (a missing or unwritable directory): one line naming ``what``.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX platforms
        yield
        return
    target = check_output_path(path, what)
    lock = target.with_name(target.name + ".lock")

    def unwritable(exc: OSError) -> FileAccessError:
        return FileAccessError(f"{what} {str(target)!r} must be writable (its lock file {lock.name!r}), got "
                               f"{type(exc).__name__}: {exc.strerror or exc}")

    for _ in range(1000):  # another attempt only when a holder removed the lock file this one opened
        made: list[Path] = []
        try:
            made = _make_parents(lock)
        except FileExistsError:  # mkdir found the directory, which a holder removed before mkdir saw it: again
            continue
        except FileNotFoundError:  # mkdir itself failed: no such place to make it
            raise FileAccessError(f"{what} {str(target)!r} must be in an existing or creatable directory, got "
                                  f"none at {str(lock.parent)!r}") from None
        except OSError as exc:
            raise unwritable(exc) from None
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileNotFoundError:  # the directory just made or found was removed by a holder meanwhile: again
            continue
        except OSError as exc:
            _remove_dirs(made)
            raise unwritable(exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held, now = os.fstat(fd), os.stat(lock)
            if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
                break
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # the file this process locked was removed by its holder: lock the one at the path now
    else:
        raise FileAccessError(f"{what} {str(target)!r} must be lockable, got its lock file {lock.name!r} removed "
                              f"1000 times while waiting")
    try:
        yield
    finally:
        try:
            if not (target.exists() or target.is_symlink()):  # nothing written: leave nothing behind
                os.unlink(lock)
                _remove_dirs(made)
        except OSError:
            pass
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
