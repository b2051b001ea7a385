"""The proxy's checks of one owner's share that need no session state, in process or on a local pool.

A share is accepted in two steps.  :func:`check_share` runs every check that
depends only on the public parameters, the owners' verify keys and the bytes
of the share: its integrity, session and key, sender, the declared d, release
and bounds, the owner's signature over the statement and the ciphertext
digest, the public layout, the range of every ciphertext, (in process)
that every ciphertext is a unit modulo n and, with range proofs on, the
owner's signature over its proof section (missing or not verifying: an
``AuthenticationError``, the owner is not excluded) and the owner's proof
that every slot is within the public bounds (:mod:`dpdpca.protocol.proofs`;
failing: a ``ProofError`` naming the owner, who is excluded).  The proxy's bookkeeping then
decides (:meth:`dpdpca.protocol.proxy.Proxy.receive_share`): a late share, a
second share of one owner, more than ``max_owners`` shares, another d, or a
ciphertext already received in another share (a replay) is refused there.

:func:`intake_kernel` is the first step for a chunk of shares in a worker of
a local process pool (:meth:`~dpdpca.protocol.proxy.Proxy.receive_shares`),
under either scheme: it checks each share as :func:`check_share` does, sums
the shares that passed (their homomorphic sum, as the aggregation would:
:meth:`~dpdpca.crypto.CipherScheme.intake_sum`, Paillier's position-wise
product modulo n**2, BFV's ciphertext additions) and returns that sum's bytes
with, per share, its verdict and where its replay keys are.  Paillier's unit
test moves from each share to the chunk's product: a product is a unit
modulo n iff every factor is, so one gcd per chunk decides it, and a chunk
whose product fails is scanned share by share (each non-unit share is then
refused with the same error as in process).  Nothing here needs or sees the
secret key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Sequence, Union

from dpdpca._validation import check_int
from dpdpca.crypto import EncryptedArray, scheme_of
from dpdpca.errors import AuthenticationError, DataError, DpdpcaError, MessageError, ProtocolError
from dpdpca.protocol.counts import ShareStatement, ciphertext_digest
from dpdpca.protocol.identity import OwnerKeyring
from dpdpca.protocol.messages import Message, MessageType, check_owner_id
from dpdpca.protocol.params import ProtocolParams, check_features
from dpdpca.protocol.proofs import PROOF_SECTION, check_proof_signature, check_share_proof
from dpdpca.protocol.releases import CENTRED, ProtocolRelease, as_release
from dpdpca.protocol.sections import check_share_units, load_share_arrays

__all__ = ["IntakeContext", "CheckedShare", "check_share", "ciphertext_keys", "add_each", "check_and_sum", "intake_kernel",
           "load_context", "error_from", "KeyRef", "keys_from_ref", "intake_threads"]


@dataclass(frozen=True)
class IntakeContext:
    """What a share is checked against: the public parameters, the owners' verify keys, the release, d's cap."""

    params: ProtocolParams
    owner_keys: OwnerKeyring
    release: ProtocolRelease
    max_features: int
    range_proofs: bool = False  # every share must carry a valid range proof (dpdpca.protocol.proofs)
    range_proof_mode: str = "slack"  # which (dpdpca.protocol.proofs.RANGE_PROOF_MODES): the session's

    def __post_init__(self) -> None:
        object.__setattr__(self, "release", as_release(self.release))

    def to_bytes(self) -> bytes:
        """JSON of the public parameters and verify keys (nothing secret), for a worker process.

        ``params`` were accepted by this process under its own key policy: a
        worker reads them back as accepted (a test key is still one only if
        they declare it) rather than deciding again.
        """
        return json.dumps({"params": self.params.to_json(), "owner_keys": self.owner_keys.to_json(),
                           "release": str(self.release), "max_features": self.max_features,
                           "range_proofs": self.range_proofs, "range_proof_mode": self.range_proof_mode},
                          sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "IntakeContext":
        obj = json.loads(data.decode())
        # the parent's decision: its params' insecure_test_key is true only if it accepted a test key itself
        return cls(ProtocolParams.from_json(obj["params"], insecure_test_key=True),
                   OwnerKeyring.from_json(obj["owner_keys"]),
                   as_release(obj["release"]), int(obj["max_features"]), bool(obj.get("range_proofs", False)),
                   str(obj.get("range_proof_mode", "slack")))


#: Where a share's replay keys are: runs ``(start, length)`` of the share's own bytes, or the keys concatenated.
KeyRef = Union[bytes, tuple[tuple[int, int], ...]]


@dataclass
class CheckedShare:
    """A share that passed :func:`check_share`: its owner, d, signed statement, arrays and parsed message."""

    owner: str
    d: int
    statement: ShareStatement
    arrays: dict[str, EncryptedArray]
    message: Message
    public_key: Any

    @functools.cached_property
    def keys(self) -> list[bytes]:
        """One replay key per ciphertext, section by section (:func:`ciphertext_keys`)."""
        return ciphertext_keys(self.message, self.arrays, self.public_key)

    def key_ref(self) -> tuple[KeyRef, int]:
        """Where :attr:`keys` lie in the bytes this share was parsed from, and their width (:func:`keys_from_ref`).

        Paillier's keys are its ciphertexts' wire bytes: one run
        ``(start, length)`` per section, from where the message put the
        section (:attr:`Message.offsets`) and where the scheme puts the
        ciphertexts in it (:meth:`~dpdpca.crypto.CipherScheme.ciphertext_key_span`),
        so no key is cut out or searched for.  Keys that are not wire bytes
        (BFV's, :meth:`~dpdpca.crypto.lattice.BFVArray.replay_keys`) come back concatenated.
        """
        scheme = scheme_of(self.public_key)
        runs: list[tuple[int, int]] = []
        width = 0
        for name, arr in self.arrays.items():
            section = self.message.section(name)
            span = scheme.ciphertext_key_span(section, arr, self.public_key)
            if span is None or name not in self.message.offsets:
                keys = self.keys
                return b"".join(keys), len(keys[0]) if keys else 1
            start, length, width = span
            runs.append((self.message.offsets[name] + start, length))
        return tuple(runs), max(1, width)


def ciphertext_keys(msg: Message, arrays: dict[str, Any], public_key: Any) -> list[bytes]:
    """One key per ciphertext of a checked share, equal for equal ciphertexts (the replay check's keys).

    Paillier: the exact fixed-width big-endian bytes (every ciphertext is
    range checked, so nothing is truncated); BFV: the first residues of each
    ciphertext's mask part (:meth:`~dpdpca.crypto.lattice.BFVArray.replay_keys`).
    """
    scheme = scheme_of(public_key)
    out: list[bytes] = []
    for name, arr in arrays.items():
        out.extend(scheme.ciphertext_keys(msg.section(name), arr, public_key))
    return out


def check_share(data: bytes, ctx: IntakeContext, *, d_expected: int | None = None,
                check_units: bool = True) -> CheckedShare:
    """Every check of one share that needs no session state (see the module docstring).

    Parameters
    ----------
    data : bytes
    ctx : IntakeContext
    d_expected : int or None
        The d of the shares accepted so far, if any: another d is refused here.
    check_units : bool
        Test every ciphertext for a unit modulo n (``False``: the caller
        tests a product of them, :func:`intake_kernel`).

    Raises
    ------
    MessageError, KeyMismatchError, AuthenticationError, ProtocolError, DataError
        As :meth:`dpdpca.protocol.proxy.Proxy.receive_share` documents.
    """
    p = ctx.params
    msg = Message.from_bytes(data, views=True)
    scheme = str(msg.meta.get("scheme", "paillier"))
    if scheme != p.scheme.name:  # before the key check: the clearer line
        raise MessageError(f"share scheme must be {p.scheme.name!r}, the session key's, got {scheme[:40]!r}")
    msg = msg.expect(MessageType.OWNER_SHARE, session=p.session_id, key_fingerprint=p.key_fingerprint)
    owner = check_owner_id(msg.meta.get("owner_id"))
    if msg.sender != f"owner:{owner}":
        raise ProtocolError(f"share sender must be owner:{owner}, got {msg.sender!r:.80}")
    if owner not in ctx.owner_keys:
        raise AuthenticationError(f"share signer must be a listed owner, got {owner!r}")
    d = p.check_d(check_features(msg.meta_int("d", minimum=1), ctx.max_features), who=f"owner {owner!r}")
    if d_expected is not None and d != d_expected:
        raise DataError(f"owners must all have d={d_expected} features, got d={d} from owner {owner!r}")
    if msg.meta.get("release", CENTRED) != ctx.release:  # a share without the field predates add/remove
        raise MessageError(f"share release must be {ctx.release!r}, got {str(msg.meta.get('release'))[:40]!r}")
    declared = {k: str(b) for k, b in p.share_bounds(ctx.release).items()}
    if msg.meta.get("declared_bounds") != declared:
        raise MessageError(f"share declared_bounds must be the public {declared}, "
                           f"got {str(msg.meta.get('declared_bounds'))[:200]}")
    # the release's ciphertext sections, each once (a second encoding of v, as version 2's "vwin", is refused),
    # and optionally a range proof
    if not set(ctx.release.sections) <= set(msg.sections) <= {*ctx.release.sections, PROOF_SECTION}:
        raise MessageError(f"share sections must be {list(ctx.release.sections)} (and optionally "
                           f"{PROOF_SECTION!r}) for the {ctx.release!r} release, got {sorted(msg.sections)[:8]}")
    statement = ShareStatement.from_json(msg.meta.get("statement"))
    if statement.owner_id != owner or statement.d != d:
        raise AuthenticationError(f"share statement must be for owner {owner!r} and d={d}, "
                                  f"got owner {statement.owner_id!r} and d={statement.d}")
    # a share of the release's sections alone was hashed once, as its message's sections digest
    if statement.ciphertext_sha256 != ciphertext_digest(msg.sections, ctx.release.sections,
                                                        whole=msg.sections_sha256):
        raise AuthenticationError(f"share statement of owner {owner!r} must cover these ciphertexts, "
                                  f"got another digest")
    ctx.release.check_statements([statement], ctx.owner_keys, session=p.session_id,
                                 key_fingerprint=p.key_fingerprint, d=d, max_owners=1,
                                 max_rows_per_owner=p.max_rows_per_owner)
    if ctx.range_proofs:  # before the proofs: a proof section changed in transit must not exclude its owner
        check_proof_signature(msg, p, ctx.owner_keys, owner_id=owner, d=d, digest=statement.ciphertext_sha256)
    arrays = load_share_arrays(msg, p, d, owners=1, release=ctx.release, check_units=check_units)
    if ctx.range_proofs:
        check_share_proof(msg, p, ctx.release, arrays, owner_id=owner, d=d, digest=statement.ciphertext_sha256,
                          mode=ctx.range_proof_mode,
                          noise=statement.noise)
    return CheckedShare(owner, d, statement, arrays, msg, p.public_key)


def error_from(kind: str, message: str, party: str | None = None) -> DpdpcaError:
    """The exception a worker reported by class name (one of :mod:`dpdpca.errors`), rebuilt in the caller.

    ``party``: a :class:`~dpdpca.errors.ProofError`'s owner id, kept.
    """
    from dpdpca import errors

    cls = getattr(errors, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, DpdpcaError)):
        cls = errors.ProtocolError
    exc = cls(message)
    if party is not None and isinstance(exc, errors.ProofError):
        exc.party = str(party)
    return exc


def keys_from_ref(data: bytes, ref: KeyRef, width: int) -> list[bytes]:
    """The replay keys :meth:`CheckedShare.key_ref` located in ``data`` (or concatenated in ``ref``).

    Examples
    --------
    >>> keys_from_ref(b"xxabcdyy", ((2, 4),), 2), keys_from_ref(b"", b"abzz", 2)
    ([b'ab', b'cd'], [b'ab', b'zz'])
    """
    if isinstance(ref, bytes):
        return [ref[i:i + width] for i in range(0, len(ref), width)]
    return [data[k:k + width] for start, length in ref for k in range(start, start + length, width)]


_CONTEXTS: dict[bytes, IntakeContext] = {}
_THREADS: dict[int, tuple[int, ThreadPoolExecutor | None]] = {}
_THREADS_LOCK = threading.Lock()


def intake_threads(workers: int) -> ThreadPoolExecutor:
    """The process's thread pool of ``workers`` threads for an intake in threads (:func:`check_and_sum`).

    Made once and kept (starting threads took about 3 ms a batch), started
    at once (:meth:`~dpdpca.protocol.proxy.Proxy.prepare` calls this while
    the collection is open), and made again in a forked child, whose copy
    would hold its parent's threads, which do not run there.
    """
    workers = check_int("workers", workers, minimum=1)
    with _THREADS_LOCK:
        pid, pool = _THREADS.get(workers, (-1, None))
        if pool is None or pid != os.getpid():
            pool = ThreadPoolExecutor(workers, thread_name_prefix="dpdpca-intake")
            _THREADS[workers] = (os.getpid(), pool)
            for future in [pool.submit(time.sleep, 0.001) for _ in range(workers)]:  # every thread started now
                future.result()
        return pool


def _context(blob: bytes) -> IntakeContext:
    key = hashlib.sha256(blob).digest()
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        _CONTEXTS.clear()  # one session at a time per worker
        ctx = _CONTEXTS[key] = IntakeContext.from_bytes(blob)
    return ctx


def load_context(context: bytes) -> tuple[int, float]:
    """Load a session's context in this pool worker ahead of its first chunk; ``(pid, CPU seconds)``.

    Rebuilding the public parameters costs a worker about 8 ms (Paillier: the
    noise allowance is derived again) to 30 ms (BFV: the key's contexts too)
    per session: data-independent work, which the proxy has its workers do
    while collection is open (:meth:`~dpdpca.protocol.proxy.Proxy.prepare`).
    """
    start = time.process_time()
    _context(context)
    return os.getpid(), time.process_time() - start


def add_each(scheme: Any, total: dict[str, Any] | None, shares: Sequence[tuple[Any, dict[str, Any]]]
             ) -> tuple[dict[str, Any] | None, list[tuple[Any, MessageError]]]:
    """Add checked shares ``(tag, arrays)`` to ``total`` (None: nothing yet) one at a time; a sum the scheme
    refuses leaves its share out.

    Under BFV a sum is refused when it is transparent (its ciphertexts' c1
    cancel to 0: :func:`~dpdpca.crypto.lattice.refused_if_transparent`), which
    fresh encryptions meet with negligible probability: the share that
    completes the cancellation (colluding owners, one sending the others'
    ciphertexts negated) is the one refused, and the others' sum goes on.
    Returns the sum of the shares kept (None if none) and ``(tag, error)``
    per share left out, in order.
    """
    refused: list[tuple[Any, MessageError]] = []
    for tag, arrays in shares:
        try:
            total = arrays if total is None else scheme.sum_sections([total, arrays])
        except MessageError as exc:
            refused.append((tag, exc))
    return total, refused


def check_and_sum(ctx: IntakeContext, d_expected: int | None, datas: Sequence[bytes]
                  ) -> tuple[list[tuple[Any, ...]], dict[int, dict[str, Any]]]:
    """Check a chunk of shares; their verdicts and, per d, the sum of those that passed.

    ``verdicts[i]`` is ``("ok", owner, d, statement_json, keys, width)``
    (``keys``: where every ciphertext's ``width``-byte replay key lies in the
    share's own bytes, section by section, which the caller holds:
    :meth:`CheckedShare.key_ref`, so the keys need not travel back, and
    :func:`keys_from_ref` reads them; or, for a scheme whose keys are not
    wire bytes, the keys concatenated) or ``("error", class name, message,
    party)`` (``party``: the owner of a failing range proof, else None); the
    sums are the scheme's (:meth:`~dpdpca.crypto.CipherScheme.intake_sum`:
    Paillier's position-wise product modulo n**2, BFV's ciphertext sums).  A
    share whose addition the scheme refuses (BFV: the partial sum would be
    transparent, :func:`add_each`) gets an error verdict and is left out.
    """
    pk = ctx.params.public_key
    scheme = ctx.params.scheme
    names = ctx.release.sections
    checked: list[CheckedShare | None] = []
    verdicts: list[tuple[Any, ...]] = []
    for data in datas:
        try:
            share = check_share(data, ctx, d_expected=d_expected, check_units=False)
        except DpdpcaError as exc:
            checked.append(None)
            verdicts.append(("error", type(exc).__name__, str(exc), getattr(exc, "party", None)))
            continue
        checked.append(share)
        verdicts.append(("ok", share.owner, share.d, share.statement.to_json(), *share.key_ref()))
    sums: dict[int, dict[str, Any]] = {}

    def summed(group: dict[int, CheckedShare]) -> dict[str, Any] | None:
        shares = [(i, {name: s.arrays[name] for name in names}) for i, s in group.items()]
        try:
            return scheme.intake_sum([arrays for _, arrays in shares])  # type: ignore[no-any-return]
        except MessageError:  # a partial sum the scheme refuses (BFV: transparent): the share that made it is out
            total, refused = add_each(scheme, None, shares)
            for i, exc in refused:
                del group[i]
                verdicts[i] = ("error", type(exc).__name__, str(exc), None)
            return total

    for d in sorted({s.d for s in checked if s is not None}):
        group = {i: s for i, s in enumerate(checked) if s is not None and s.d == d}
        total = summed(group)
        if total is None:
            continue
        try:  # Paillier: the sum is a unit iff every summand is, so one test per chunk
            scheme.check_units(total, pk)
        except MessageError:
            for i, share in list(group.items()):  # some share holds a non-unit: refuse it, sum the rest again
                try:
                    check_share_units(share.arrays, pk)
                except MessageError as exc:
                    del group[i]
                    verdicts[i] = ("error", type(exc).__name__, str(exc))
            if not group:
                continue
            total = summed(group)
            if total is None:
                continue
        sums[d] = total
    return verdicts, sums


def intake_kernel(context: bytes, d_expected: int | None, datas: Sequence[bytes]
                  ) -> tuple[list[tuple[Any, ...]], dict[int, dict[str, bytes]], float]:
    """:func:`check_and_sum` in a worker process: ``(verdicts, sums, cpu_s)``, each sum as the scheme's bytes.

    ``sums[d]`` is :meth:`~dpdpca.crypto.CipherScheme.intake_bytes` of the
    sum of the passing shares of that d; ``cpu_s`` this call's CPU seconds
    in the worker.  Only ``bytes``, numbers and ``str`` cross the process
    boundary.
    """
    start = time.process_time()
    ctx = _context(context)
    verdicts, sums = check_and_sum(ctx, d_expected, datas)
    scheme = ctx.params.scheme
    return verdicts, {d: scheme.intake_bytes(total) for d, total in sums.items()}, time.process_time() - start
