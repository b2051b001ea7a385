"""An owner's offline work: the encryptions of zero of one share, made before the data arrive.

Every ciphertext of a share is ``(1 + m n) f mod n**2`` with a DJN factor
``f = hs'**alpha`` under the owner's own base (:meth:`PublicKey.with_own_base`).
The factors depend on the key, d and the release only, so an owner makes them
ahead (``dpdpca owner prepare``, or :meth:`DataOwner.precompute`) and its
online encryption is then one multiplication per ciphertext.

Whoever holds a share's factors reads its plaintexts (``c f**-1 = 1 + m n``),
so they are as secret as the data: the file is written 0600 in the owner's
own directory, refused if anyone else may read it, read once and deleted
before it is used (:meth:`OwnerRandomness.consume`), and never logged
(``repr`` shows counts only).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from dpdpca._io import atomic_write_bytes
from dpdpca._validation import check_int
from dpdpca.crypto import PublicKey, encryptions_of_zero
from dpdpca.crypto.ciphertexts import from_fixed_bytes, to_fixed_bytes
from dpdpca.crypto.compute import EngineLike
from dpdpca.errors import FileAccessError, MessageError, ProtocolError
from dpdpca.protocol.releases import as_release

__all__ = ["RANDOMNESS_FILE", "OwnerRandomness"]

#: Default file name in the owner's directory.
RANDOMNESS_FILE = "randomness.bin"
_MAGIC = b"DPDPCA-OWNER-RANDOMNESS-1\n"
_MAX_HEADER_BYTES = 1 << 16  # the JSON header line (a few sections): anything longer is not one


@dataclass
class OwnerRandomness:
    """The DJN factors of one share: ``sections[name]`` holds one factor per ciphertext of that section.

    Attributes
    ----------
    key_fingerprint : str
        The data user's key (the factors are modulo its ``n**2``).
    release : str
    d : int
    slots : int
        Slots per ciphertext of the public layout (fixes the section sizes).
    sections : dict of str to list of int
    """

    key_fingerprint: str
    release: str
    d: int
    slots: int
    sections: dict[str, list[int]]

    def __repr__(self) -> str:  # never the factors
        counts = {k: len(v) for k, v in self.sections.items()}
        return f"OwnerRandomness(release={self.release!r}, d={self.d}, factors={counts})"

    @classmethod
    def make(cls, own_key: PublicKey, *, key_fingerprint: str, release: str, d: int, slots: int,
             executor: EngineLike = None) -> OwnerRandomness:
        """Fresh factors ``hs'**alpha`` (``alpha`` from ``os.urandom``) for every ciphertext of one share.

        ``executor``: a local process pool (or any engine) shares the work.
        """
        d = check_int("d", d, minimum=1)
        shapes = as_release(release).share_chunks(d, slots)
        total = sum(len(c) for c in shapes.values())
        factors = encryptions_of_zero(own_key, total, method="djn", executor=executor)
        own_key.drop_table()
        out: dict[str, list[int]] = {}
        pos = 0
        for name, chunks in shapes.items():
            out[name] = factors[pos:pos + len(chunks)]
            pos += len(chunks)
        return cls(key_fingerprint, str(release), d, int(slots), out)

    def matches(self, *, key_fingerprint: str, release: str, d: int, slots: int) -> bool:
        """True if these factors were made for this key, release, d and layout."""
        return (self.key_fingerprint, self.release, self.d, self.slots) == (key_fingerprint, release, d, slots)

    def save(self, path: str | os.PathLike[str], public_key: PublicKey) -> Path:
        """Write the factors to ``path`` (mode 0600, atomically; an existing file is refused)."""
        return atomic_write_bytes(path, self.to_bytes(public_key), mode=0o600, exclusive=True)

    def to_bytes(self, public_key: PublicKey) -> bytes:
        """The file's bytes: the magic line, the JSON header, then the factors at the key's ciphertext width."""
        width = public_key.ciphertext_bytes
        header = json.dumps({"key_fingerprint": self.key_fingerprint, "release": self.release, "d": self.d,
                             "slots": self.slots, "width": width,
                             "sections": [[k, len(v)] for k, v in self.sections.items()]},  # in blob order
                            sort_keys=True, separators=(",", ":")).encode()
        # in the header's section order (a list, not an object whose keys JSON sorts), which consume() reads back
        blob = to_fixed_bytes([f for v in self.sections.values() for f in v], width)
        return _MAGIC + header + b"\n" + blob

    @classmethod
    def consume(cls, path: str | os.PathLike[str], public_key: PublicKey, *, release: str | None = None,
                d: int | None = None, slots: int | None = None) -> OwnerRandomness:
        """Read and check the factors at ``path``, then delete the file before anything uses them (used once).

        Every check comes before the deletion: the file's owner and mode, the
        magic line, the header, the key, the size, and (given) the release, d
        and layout.  A file that fails one is never touched: it may not be a
        randomness file at all (a mistyped ``--randomness`` naming a key or an
        identity), or it may be this owner's for another share.  The file
        deleted is the one read (same device and inode), never another put at
        ``path`` meanwhile.

        Raises
        ------
        FileAccessError
            The file is missing, not a regular file of this user, readable or
            writable by group or others, or replaced while it was read.
        MessageError
            Not a randomness file, malformed, or made under another key.
        ProtocolError
            Made for another release, d or layout than the given ones.
        """
        p = Path(path)
        try:
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            raise FileAccessError(f"randomness file {str(p)!r} must be readable, got {type(exc).__name__}: "
                                  f"{exc.strerror or exc}") from None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise FileAccessError(f"randomness file {str(p)!r} must be a regular file of this user with mode "
                                      f"0600, got mode {stat.S_IMODE(st.st_mode):o}")
            made = cls._read(fh, p, public_key, size=st.st_size)
        wanted = {"release": None if release is None else str(release), "d": d, "slots": slots}
        got = {"release": made.release, "d": made.d, "slots": made.slots}
        wrong = [f"{k}={v!r}" for k, v in wanted.items() if v is not None and v != got[k]]
        if wrong:
            raise ProtocolError(f"randomness file {str(p)!r} must be made for {', '.join(wrong)}, got {made!r} "
                                f"(the file is kept)")
        try:
            now = os.lstat(p)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise FileAccessError(f"randomness file {str(p)!r} must stay in place while it is read, got another "
                                  f"file there (nothing deleted)")
        p.unlink()  # before use: a crash later loses these factors, never reuses them
        return made

    @classmethod
    def _read(cls, fh: BinaryIO, p: Path, public_key: PublicKey, *, size: int) -> OwnerRandomness:
        """Parse an open randomness file of ``size`` bytes: magic line, header, then the factors the header counts.

        Reads the factors only once the header has proved a randomness file of this key and of its size.
        """
        if fh.read(len(_MAGIC)) != _MAGIC:
            raise MessageError(f"randomness file {str(p)!r} must start with {_MAGIC[:-1].decode()!r}, got another file")
        line = fh.readline(_MAX_HEADER_BYTES + 1)
        try:
            if not line.endswith(b"\n"):
                raise ValueError("no header line")
            head = json.loads(line)
            sizes = {str(k): int(v) for k, v in head["sections"]}
            width = int(head["width"])
            fingerprint, release = str(head["key_fingerprint"]), str(head["release"])
            d, slots = int(head["d"]), int(head["slots"])
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise MessageError(f"randomness file {str(p)!r} must have a valid header, got a malformed one") from None
        if fingerprint != public_key.fingerprint or width != public_key.ciphertext_bytes:
            raise MessageError(f"randomness file key must be {public_key.fingerprint[:16]}..., got {fingerprint[:16]}...")
        count = sum(sizes.values())
        if min(sizes.values(), default=0) < 0:
            raise MessageError(f"randomness file {str(p)!r} must have a valid header, got a negative count")
        if size - len(_MAGIC) - len(line) != width * count:
            raise MessageError(f"randomness file must hold {count} factors of {width} bytes, got "
                               f"{size - len(_MAGIC) - len(line)} bytes")
        blob = fh.read(width * count)
        if len(blob) != width * count:  # shortened while read
            raise MessageError(f"randomness file must hold {count} factors of {width} bytes, got {len(blob)} bytes")
        values = [int(v) for v in from_fixed_bytes(blob, width)]
        sections: dict[str, list[int]] = {}
        pos = 0
        for name, n in sizes.items():
            sections[name] = values[pos:pos + n]
            pos += n
        return cls(fingerprint, release, d, slots, sections)
