"""Transports: move message bytes between named parties, nothing more.

A transport knows nothing of what the bytes mean (``docs/architecture.md``).
:class:`Transport` is the interface (a :class:`typing.Protocol`) the parties'
steps (:mod:`dpdpca.protocol.roles`) are written against; every deployment is
one of these plus a launcher.  Three are provided here:

* :class:`InProcessTransport` - queues in one process (the default runner);
* :class:`FileTransport` - one file per message in a directory per recipient
  (what the per-role CLI does by hand);
* :class:`PipeTransport` - ``multiprocessing`` pipes between OS processes,
  using ``send_bytes``/``recv_bytes`` only (no pickled objects).

The proxy service's client side (:class:`dpdpca.net.client.ServiceTransport`,
HTTPS) and the role commands' single files
(:class:`PathTransport`) are the others.  Every transport counts the bytes
each party sends.
"""

from __future__ import annotations

import collections
import os
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Mapping, Protocol, Sequence

from dpdpca._io import ReservedOutput, atomic_write_bytes, read_bytes_file
from dpdpca.errors import ProtocolError
from dpdpca.protocol.messages import check_frame

__all__ = ["Transport", "CountingTransport", "InProcessTransport", "FileTransport", "PipeTransport",
           "PathTransport", "take_message_file"]


def take_message_file(path: str, *, keep_read: bool) -> bytes:
    """A box's message file read and taken out of the box, as :class:`FileTransport` does (see its ``keep_read``).

    An unbuffered read on a ``str`` path (a few syscalls, no pathlib objects
    per message); then the file is deleted, or renamed into ``read/`` beside
    it.  ``FileNotFoundError``: another reader of the same box took it first.
    """
    with open(path, "rb", buffering=0) as f:
        data = f.readall()
    if keep_read:
        head, name = os.path.split(path)
        os.rename(path, os.path.join(head, "read", name))
    else:
        os.unlink(path)
    return data


class Transport(Protocol):
    """What the parties' steps need of a deployment: bytes to a named party, bytes for a named party.

    Parties are named ``"owner:<id>"``, ``"proxy"`` and ``"user"``.
    ``bytes_sent`` counts what each sender sent.
    """

    bytes_sent: dict[str, int]

    def send(self, sender: str, recipient: str, payload: bytes) -> None:
        """Deliver ``payload`` from ``sender`` to ``recipient``."""

    def receive(self, recipient: str, *, timeout: float | None = None) -> bytes | None:
        """The next message for ``recipient``, or None after ``timeout`` seconds (None: wait as the
        transport waits; in-memory queues never wait)."""


class CountingTransport:
    """Base of the transports here: ``send`` and ``receive`` bytes; tracks ``bytes_sent`` and a log."""

    def __init__(self) -> None:
        self.bytes_sent: dict[str, int] = {}
        #: (sender, recipient, n_bytes) of every message, in order.
        self.log: list[tuple[str, str, int]] = []

    def _count(self, sender: str, recipient: str, payload: bytes) -> None:
        self.bytes_sent[sender] = self.bytes_sent.get(sender, 0) + len(payload)
        self.log.append((sender, recipient, len(payload)))

    def send(self, sender: str, recipient: str, payload: bytes) -> None:
        raise NotImplementedError

    def receive(self, recipient: str, *, timeout: float | None = None) -> bytes | None:
        """The next message for ``recipient``, or None after ``timeout`` seconds."""
        raise NotImplementedError


class InProcessTransport(CountingTransport):
    """FIFO queues per recipient in one process; ``receive`` never blocks."""

    def __init__(self) -> None:
        super().__init__()
        self._queues: dict[str, collections.deque[bytes]] = collections.defaultdict(collections.deque)

    def send(self, sender: str, recipient: str, payload: bytes) -> None:
        self._count(sender, recipient, payload)
        self._queues[recipient].append(bytes(payload))

    def receive(self, recipient: str, *, timeout: float | None = None) -> bytes | None:
        queue = self._queues[recipient]
        return queue.popleft() if queue else None


class FileTransport(CountingTransport):
    """One file per message under ``root/<recipient>/``, written atomically.

    Parameters
    ----------
    root : path
        One directory per recipient is made under it.
    poll_s : float
        Sleep between two looks at an empty box.
    keep_read : bool
        How a message read is taken out of the box: ``False`` (default)
        deletes its file; ``True`` renames it into ``<box>/read/``, and the
        owner of ``root`` removes the directory later.  Either way exactly one
        reader takes each message (both are atomic: a second reader gets
        ``FileNotFoundError`` and moves on).  Deleting a file whose blocks
        were written back long before is slow on some file systems (ext4
        mounted with ``discard``: about 0.4-0.8 ms a file against 0.05 ms for a
        rename), which the timing benchmark would otherwise charge to the
        proxy once per share, although it is clean-up, not transmission.
    """

    def __init__(self, root: str | os.PathLike[str], *, poll_s: float = 0.05, keep_read: bool = False) -> None:
        super().__init__()
        self.root = Path(root)
        self.poll_s = poll_s
        self.keep_read = bool(keep_read)
        self._seq = 0
        # One directory listing serves many receives (listing per message made n receives O(n^2)).
        self._pending: dict[str, collections.deque[Path]] = collections.defaultdict(collections.deque)

    @staticmethod
    def _safe(name: str) -> str:
        return name.replace(":", "_").replace("/", "_")

    def send(self, sender: str, recipient: str, payload: bytes) -> None:
        self._count(sender, recipient, payload)
        self._seq += 1
        name = f"{time.time_ns():020d}-{self._seq:06d}-{self._safe(sender)}.msg"
        atomic_write_bytes(self.root / self._safe(recipient) / name, payload)

    def receive(self, recipient: str, *, timeout: float | None = None) -> bytes | None:
        box = self.root / self._safe(recipient)
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = self._pending[recipient]
        while True:
            if not pending and box.is_dir():
                pending.extend(sorted(box.glob("*.msg")))  # names start with time_ns: new files sort later
                if pending and self.keep_read:
                    (box / "read").mkdir(exist_ok=True)
            while pending:
                try:
                    return take_message_file(os.fspath(pending.popleft()), keep_read=self.keep_read)
                except FileNotFoundError:  # taken by another reader of the same box
                    continue
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(self.poll_s)


class PipeTransport(CountingTransport):
    """Byte pipes to peers, as seen from one process.

    Parameters
    ----------
    me : str
        This process's party name.
    peers : mapping of party name to Connection
        One duplex connection per peer this party talks to.
    send_only : iterable of str
        Peers this party only sends to (``receive`` does not wait on them).
    """

    def __init__(self, me: str, peers: Mapping[str, Connection], *, send_only: Sequence[str] = ()) -> None:
        super().__init__()
        self.me = me
        self.peers = dict(peers)
        self._closed: set[str] = set(send_only)

    def send(self, sender: str, recipient: str, payload: bytes) -> None:
        self._count(sender, recipient, payload)
        self.peers[recipient].send_bytes(bytes(payload))

    def receive(self, recipient: str, *, timeout: float | None = None) -> bytes | None:
        open_conns = [c for name, c in self.peers.items() if name not in self._closed]
        deadline = None if timeout is None else time.monotonic() + timeout
        while open_conns:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait(open_conns, timeout=left)
            if not ready:
                return None
            conn = next(c for c in open_conns if c is ready[0])
            try:
                return conn.recv_bytes()
            except EOFError:  # a peer that exits without sending is simply absent
                name = next(n for n, c in self.peers.items() if c is conn)
                self._closed.add(name)
                open_conns.remove(conn)
        return None


class PathTransport(CountingTransport):
    """Named files, as the per-role commands exchange them by hand.

    ``send`` writes each message to the next path of ``outbox`` (atomically;
    an outbox entry may be a :class:`~dpdpca._io.ReservedOutput` the command
    made before its work, so that an unwritable path is refused first);
    ``receive`` reads the next path of ``inbox``, and returns None once they
    are all read.  The recipient does not choose the file: the command line
    does.

    Parameters
    ----------
    outbox : sequence of path or ReservedOutput
    inbox : sequence of path
    what : str
        What the inbox files hold, for the error of a missing or unreadable file, or of one that is no whole
        message (:func:`~dpdpca.protocol.messages.check_frame`, checked as it is read).
    """

    def __init__(self, *, outbox: Sequence[str | os.PathLike[str] | ReservedOutput] = (),
                 inbox: Sequence[str | os.PathLike[str]] = (), what: str = "message") -> None:
        super().__init__()
        self._out: collections.deque[Path | ReservedOutput] = collections.deque(
            p if isinstance(p, ReservedOutput) else Path(p) for p in outbox)
        self._in = collections.deque(str(p) for p in inbox)
        self.what = what

    def send(self, sender: str, recipient: str, payload: bytes) -> None:
        if not self._out:
            raise ProtocolError(f"{sender} must have an output file for its message to {recipient}, got none")
        self._count(sender, recipient, payload)
        out = self._out.popleft()
        if isinstance(out, ReservedOutput):
            out.write(payload)
        else:
            atomic_write_bytes(out, payload)

    def receive(self, recipient: str, *, timeout: float | None = None) -> bytes | None:
        if not self._in:
            return None
        path = self._in.popleft()
        data = read_bytes_file(path, self.what)
        check_frame(data, f"{self.what} file {path!r}")  # a garbage or truncated file is refused naming it
        return data
