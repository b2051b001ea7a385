"""The owners' signed share statements and the row count N they bind.

Under replace-one neighbouring the number of rows is public, so each owner
sends its count ``N_l`` in the clear, inside a statement it signs with its
Ed25519 key (:mod:`dpdpca.protocol.identity`)::

    "dpdpca/owner-share/v3" NUL {"ciphertext_sha256": ..., "d": ..., "key_fingerprint": ...,
                                 "n_rows": ..., "noise": ..., "owner_id": ..., "session": ...}

``noise`` says what DP noise the share holds: ``"none"`` (the proxy adds
it), or the owners' distributed noise as the parameters it was calibrated
with (:func:`dpdpca.protocol.add_remove.owner_noise_label`).  The proxy
refuses to finish a session whose noise disagrees with a statement, and the
data user refuses a release whose ``noise_by`` disagrees with them.

``ciphertext_sha256`` is the SHA-256 of the share's ciphertext sections
(:func:`ciphertext_digest`), so the statement binds the count to exactly
those ciphertexts, that owner id, that session and that key: a share replayed
under another id or session, or with a changed count, fails to verify.

The proxy checks each statement when a share arrives, sums the counts to N
and forwards the statements with its result; the data user checks them again
against its own copy of the owners' verify keys (:func:`check_counts`) and
accepts only the N they add up to.  There is therefore no count round: the
data user never decrypts anything on the proxy's behalf.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from dpdpca.errors import AuthenticationError, DpdpcaError, MessageError, ProtocolError
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring, b64url, check_owner_id, statement_bytes, unb64url
from dpdpca.protocol.messages import sections_digest

__all__ = ["SHARE_DOMAIN", "SHARE_SECTIONS", "NO_NOISE", "check_noise_statements", "ShareStatement", "ciphertext_digest", "check_counts",
           "check_statements"]

#: Domain string of an owner-share statement (a signature on it verifies as nothing else).
SHARE_DOMAIN = "dpdpca/owner-share/v3"
#: What a share's statement says when it holds no DP noise (the proxy adds it).
NO_NOISE = "none"
_NOISE = re.compile(r"[a-z]+(:[A-Za-z0-9_.,=+-]{1,200})?")
_DIGITS = re.compile(r"[0-9]{1,20}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
#: The ciphertext sections of an owner share, in digest order.
SHARE_SECTIONS = ("R", "v")


def ciphertext_digest(sections: Mapping[str, bytes], names: Sequence[str] = SHARE_SECTIONS, *,
                      whole: str = "") -> str:
    """SHA-256 hex over ``names`` in order, each as name, 8-byte length, body (unambiguous): the messages'
    sections digest (:func:`~dpdpca.protocol.messages.sections_digest`) of those sections.

    ``whole``: the sections digest of all of ``sections`` in order, when known
    (a parsed message's :attr:`~dpdpca.protocol.messages.Message.sections_sha256`):
    it is this digest when ``sections`` are exactly ``names``, and nothing is hashed again.

    Raises
    ------
    MessageError
        A section is missing.
    """
    missing = [name for name in names if name not in sections]
    if missing:
        raise MessageError(f"share must have section {missing[0]!r}, got {sorted(sections)}")
    if whole and tuple(sections) == tuple(names):
        return whole
    return sections_digest({name: sections[name] for name in names}).hex()


@dataclass(frozen=True)
class ShareStatement:
    """One owner's signed statement about its share.

    Parameters
    ----------
    owner_id : str
    d : int
        Number of features.
    n_rows : int or None
        The owner's row count ``N_l`` (public under replace-one).  None in the
        add/remove-one release, where N is private: the statement then
        authenticates the ciphertexts only and the count travels encrypted,
        with noise.
    ciphertext_sha256 : str
        :func:`ciphertext_digest` of the share's sections.
    signature : str
        base64url Ed25519 signature of :meth:`payload`.
    noise : str
        The DP noise the share holds: :data:`NO_NOISE` or an owners' noise label.
    """

    owner_id: str
    d: int
    n_rows: int | None
    ciphertext_sha256: str
    signature: str
    noise: str = NO_NOISE

    @staticmethod
    def payload_for(*, session: str, key_fingerprint: str, owner_id: str, d: int, n_rows: int | None,
                    ciphertext_sha256: str, noise: str = NO_NOISE) -> bytes:
        return statement_bytes(SHARE_DOMAIN, {"session": session, "key_fingerprint": key_fingerprint,
                                              "owner_id": owner_id, "d": d, "noise": noise,
                                              # -1 (never a count) signs "no count" (add/remove release)
                                              "n_rows": -1 if n_rows is None else n_rows,
                                              "ciphertext_sha256": ciphertext_sha256})

    def payload(self, *, session: str, key_fingerprint: str) -> bytes:
        """The signed bytes, in the given session and under the given key."""
        return self.payload_for(session=session, key_fingerprint=key_fingerprint, owner_id=self.owner_id,
                                d=self.d, n_rows=self.n_rows, ciphertext_sha256=self.ciphertext_sha256,
                                noise=self.noise)

    @classmethod
    def sign(cls, identity: OwnerIdentity, *, session: str, key_fingerprint: str, d: int, n_rows: int | None,
             ciphertext_sha256: str, noise: str = NO_NOISE) -> "ShareStatement":
        """The owner's statement, signed with its identity."""
        payload = cls.payload_for(session=session, key_fingerprint=key_fingerprint, owner_id=identity.owner_id,
                                  d=d, n_rows=n_rows, ciphertext_sha256=ciphertext_sha256, noise=noise)
        sig = b64url(identity.sign(payload))
        return cls(identity.owner_id, d, n_rows, ciphertext_sha256, sig, noise)

    def verify(self, keyring: OwnerKeyring, *, session: str, key_fingerprint: str) -> None:
        """Check the signature against the owner's listed key.

        Raises
        ------
        AuthenticationError
            Unknown owner, malformed or non-verifying signature.
        """
        raw = unb64url(self.signature)
        if raw is None:
            raise AuthenticationError(f"signature of owner {self.owner_id!r} must be base64url, got a malformed "
                                      f"value")
        keyring.verify(self.owner_id, self.payload(session=session, key_fingerprint=key_fingerprint), raw)

    def to_json(self) -> dict[str, Any]:
        return {"owner_id": self.owner_id, "d": self.d, "n_rows": None if self.n_rows is None else str(self.n_rows),
                "ciphertext_sha256": self.ciphertext_sha256, "signature": self.signature, "noise": self.noise}

    @classmethod
    def from_json(cls, obj: Any) -> "ShareStatement":
        """Parse; shapes only (the signature is checked by :meth:`verify`).

        Raises
        ------
        MessageError
            Missing or malformed fields.
        ProtocolError
            A malformed owner id.
        """
        if not isinstance(obj, Mapping):
            raise MessageError(f"share statement must be an object, got {type(obj).__name__}")
        owner = check_owner_id(obj.get("owner_id"))
        d, n = obj.get("d"), obj.get("n_rows")
        digest, sig = obj.get("ciphertext_sha256"), obj.get("signature")
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise MessageError(f"share statement d must be an integer >= 1, got {str(d)[:40]!r}")
        if n is not None and (not isinstance(n, str) or _DIGITS.fullmatch(n) is None):
            raise MessageError(f"share statement n_rows must be a decimal string or null, got {str(n)[:40]!r}")
        if not isinstance(digest, str) or _HEX64.fullmatch(digest) is None:
            raise MessageError(f"share statement ciphertext_sha256 must be 64 hex characters, got {str(digest)[:80]!r}")
        if not isinstance(sig, str) or len(sig) > 128:
            raise MessageError(f"share statement signature must be a base64url string, got {type(sig).__name__}")
        noise = obj.get("noise")
        if not isinstance(noise, str) or _NOISE.fullmatch(noise) is None:
            raise MessageError(f"share statement noise must be 'none' or an owners' noise label, got "
                               f"{str(noise)[:80]!r}")
        return cls(owner, d, None if n is None else int(n), digest, sig, noise)


def check_counts(statements: Any, keyring: OwnerKeyring, *, session: str, key_fingerprint: str, d: int,
                 max_owners: int, max_rows_per_owner: int) -> tuple[list[ShareStatement], int]:
    """Verify every owner's signed statement and return them with ``N = sum N_l``.

    Used by the data user on the proxy's result, and by the proxy on its own state.

    Raises
    ------
    MessageError
        Not a non-empty list of at most ``max_owners`` statements, a statement
        for another d, or a count outside ``[1, max_rows_per_owner]``.
    ProtocolError
        The same owner twice.
    AuthenticationError
        A signature that does not verify, or an owner the keyring does not list.
    """
    parsed = check_statements(statements, keyring, session=session, key_fingerprint=key_fingerprint, d=d,
                              max_owners=max_owners, counted=True)
    for st in parsed:
        if st.n_rows is None or not 1 <= st.n_rows <= max_rows_per_owner:
            raise MessageError(f"owner {st.owner_id!r} row count must be in [1, {max_rows_per_owner}], "
                               f"got {st.n_rows}")
    return parsed, sum(int(st.n_rows or 0) for st in parsed)


def check_statements(statements: Any, keyring: OwnerKeyring, *, session: str, key_fingerprint: str, d: int,
                     max_owners: int, counted: bool) -> list[ShareStatement]:
    """Verify every owner's signed statement; ``counted`` says whether they carry counts (replace-one) or not.

    ``statements``: their JSON objects, or :class:`ShareStatement` values
    already parsed by :meth:`ShareStatement.from_json` (the proxy's intake:
    not parsed a second time).

    Raises
    ------
    MessageError
        Not a non-empty list of at most ``max_owners`` statements, a statement
        for another d, or a count present where none may be (add/remove-one:
        N is private) or absent where one must be.
    ProtocolError
        The same owner twice.
    AuthenticationError
        A signature that does not verify, or an owner the keyring does not list.
    """
    if not isinstance(statements, list) or not 1 <= len(statements) <= max_owners:
        raise MessageError(f"share statements must be a list of 1 to {max_owners}, got "
                           f"{len(statements) if isinstance(statements, list) else type(statements).__name__}")
    parsed = [s if isinstance(s, ShareStatement) else ShareStatement.from_json(s) for s in statements]
    failed = _verify_all(parsed, keyring, session=session, key_fingerprint=key_fingerprint)
    seen: set[str] = set()
    for st, error in zip(parsed, failed):
        if st.owner_id in seen:
            raise ProtocolError(f"owner ids must be unique in the share statements, got {st.owner_id!r} twice")
        seen.add(st.owner_id)
        if st.d != d:
            raise MessageError(f"share statement of owner {st.owner_id!r} must have d={d}, got {st.d}")
        if (st.n_rows is None) == counted:
            raise MessageError(f"share statement of owner {st.owner_id!r} must "
                               f"{'carry its row count' if counted else 'carry no row count (N is private)'}, "
                               f"got n_rows={st.n_rows}")
        if error is not None:  # raised where a serial check would have: the first failing statement, in order
            raise error
    return parsed


#: Fewest statements verified on threads (below it, one thread: a thread pool costs more than it saves).
THREADED_VERIFY_MIN = 32


def _verify_all(parsed: Sequence[ShareStatement], keyring: OwnerKeyring, *, session: str,
                key_fingerprint: str) -> list[DpdpcaError | None]:
    """Each statement's signature check: its error (AuthenticationError) or None, in order.

    Many statements (the data user's L of them, on its critical path) are
    checked in two halves on two threads: Ed25519 verification releases the
    GIL, so on two cores the halves take about half the time (200
    statements: 6.8 ms against 13.6).  Every signature is checked either way.
    """
    def check(part: Sequence[ShareStatement]) -> list[DpdpcaError | None]:
        out: list[DpdpcaError | None] = []
        for st in part:
            try:
                st.verify(keyring, session=session, key_fingerprint=key_fingerprint)
                out.append(None)
            except DpdpcaError as exc:
                out.append(exc)
        return out

    if len(parsed) < THREADED_VERIFY_MIN or (os.cpu_count() or 1) < 2:
        return check(parsed)
    half = len(parsed) // 2
    with ThreadPoolExecutor(2, thread_name_prefix="dpdpca-verify") as pool:
        first = pool.submit(check, parsed[:half])
        second = check(parsed[half:])
        return first.result() + second


def check_noise_statements(statements: Sequence[ShareStatement], expected: str) -> None:
    """Every statement must say the share holds ``expected`` noise (the session's), else refuse naming the owner.

    Raises
    ------
    ProtocolError
        A statement whose noise disagrees: e.g. a noiseless share (``"none"``)
        in a session whose noise the owners add, which would release the exact
        values under a DP report.
    """
    for st in statements:
        if st.noise != expected:
            raise ProtocolError(f"share statement of owner {st.owner_id!r} must say its share holds the session's "
                                f"noise {expected!r}, got {st.noise!r}")
