"""The honest-but-curious proxy: verify and aggregate shares, mask, add DP noise under encryption, release once.

Its steps are :meth:`Proxy.receive_share`, :meth:`Proxy.close_collection`
(Wang & Chang, Alg. 1 lines 2-4; N is the sum of the signed counts) and
:meth:`Proxy.finish` (lines 6-11, or :meth:`Proxy.finish_add_remove`);
:class:`dpdpca.protocol.roles.ProxySteps` drives them for every deployment.
It never holds the secret key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from dpdpca._validation import check_delta, check_int, param_error
from dpdpca.crypto import EncryptedArray, scalars_times_packed, sum_arrays
from dpdpca.crypto.compute import EngineLike, ExecutorEngine, as_engine
from dpdpca.crypto.randomizers import RandomizerPool
from dpdpca.dp.accountant import PrivacyLedger
from dpdpca.errors import DataError, DpdpcaError, MessageError, OverflowRiskError, ProofError, ProtocolError
from dpdpca.protocol import add_remove
from dpdpca.protocol.config import ReleaseOptions
from dpdpca.protocol.counts import ShareStatement, check_noise_statements
from dpdpca.protocol.identity import OwnerKeyring
from dpdpca.protocol.layout import row_chunk_spans, window_chunks
from dpdpca.protocol.ledger import ReleaseLedger
from dpdpca.protocol.masking import draw_mask, mask_bound
from dpdpca.protocol.messages import Message, MessageType
from dpdpca.protocol.params import DEFAULT_MAX_FEATURES, ProtocolParams, check_features
from dpdpca.protocol.proofs import check_range_proof_mode
from dpdpca.protocol.releases import CENTRED, ReleaseNoise, as_release
from dpdpca.protocol.intake import (IntakeContext, add_each, check_and_sum, check_share, error_from,
                                   intake_kernel, intake_threads, keys_from_ref, load_context)
from dpdpca.protocol.sections import load_share_arrays
from dpdpca.timing import Timings

_log = logging.getLogger("dpdpca.proxy")

__all__ = ["Proxy", "POOL_MIN_MULMODS", "intake_chunk_sizes"]

#: Fewest multiplications the aggregation sends to the proxy's engine (fewer: in process, about 4 ms at most).
POOL_MIN_MULMODS = 1024
#: Shares in each pool worker's first chunk of the intake (the later chunks are larger).
FIRST_CHUNK = 4


#: Most shares in one chunk of the pooled intake.
MAX_CHUNK = 32


def intake_chunk_sizes(expected: int | None, workers: int) -> list[int]:
    """Shares per chunk of a pooled intake of ``expected`` shares on ``workers`` processes (then 16 each).

    Each worker's first chunk is small (:data:`FIRST_CHUNK`), so every worker
    starts after a few reads; the rest is split into equal chunks (sizes
    differ by at most one, at most :data:`MAX_CHUNK`), as many as a multiple
    of ``workers``, so the workers end together (chunks of one size and a last
    one of whatever remains would leave one worker checking up to a whole
    chunk alone).  Unknown ``expected``: the first chunks, then chunks of 16
    (:func:`_next_size`).

    Examples
    --------
    >>> intake_chunk_sizes(100, 2)
    [4, 4, 23, 23, 23, 23]
    >>> intake_chunk_sizes(5, 2)
    [1, 1, 2, 1]
    """
    workers = max(1, int(workers))
    if expected is None:
        return [FIRST_CHUNK] * workers
    left = max(1, int(expected))
    size = min(FIRST_CHUNK, max(1, left // (2 * workers)))
    first = [size] * min(workers, left // size)
    rest = left - sum(first)
    parts = -(-rest // MAX_CHUNK)
    parts = -(-parts // workers) * workers if parts else 0
    parts = min(parts, rest)
    return first + [rest // parts + (k < rest % parts) for k in range(parts)] if parts else first


def _next_size(sizes: list[int], made: int) -> int:
    """The size of chunk number ``made`` of :func:`intake_chunk_sizes` (16 past its end: more shares than expected)."""
    return sizes[made] if made < len(sizes) else 16


class Proxy:
    """The honest-but-curious proxy: aggregates, masks and adds DP noise.

    It is built from the *public* parameters only; it never holds the secret
    key (``tests/protocol`` walks its attributes to check).

    Parameters
    ----------
    params : ProtocolParams
    owner_keys : OwnerKeyring
        The owners allowed to send a share, with their Ed25519 verify keys.
        Unsigned shares and unknown signers are refused.
    quorum : int or None
        Minimum number of shares to proceed; default every listed owner.
    executor : Executor, compute engine, distributed.Client or None
        Runs the homomorphic batches.
    ledger : ReleaseLedger or None
        Where the one release of the session is recorded; default in memory.
        The file CLI keeps it in the proxy's state directory.
    max_features : int
        Largest d accepted from a share (checked before any allocation).
    record_noise_for_testing : bool
        Keep the drawn noise in ``noise_for_testing_`` (the upper triangle of
        G'' as added to R'').  Test and ``--verify`` hook only; a real proxy
        must not disclose it to the data user.
    release : {"add-remove", "centred"} or ProtocolRelease
        Which release the owners' shares are for (:mod:`dpdpca.protocol.releases`);
        default add/remove, as the CLI's.
    range_proofs : bool
        Every share must carry a valid range proof (:mod:`dpdpca.protocol.proofs`),
        checked in the intake; an owner whose proof fails is refused, logged
        and excluded from the session (``excluded_``).  The owner signs its
        proof section: one it did not sign (missing, or changed in transit)
        is refused as an ``AuthenticationError`` and excludes nobody.
    range_proof_mode : {"slack", "exact"}
        The session's proof mode (:data:`dpdpca.protocol.proofs.RANGE_PROOF_MODES`):
        a share proved in the other mode is refused like a failing proof.

    Attributes
    ----------
    owners_ : list of str
        Owners in the aggregate, in arrival order (after :meth:`close_collection`).
    n_ : int
        ``N``, the sum of their signed counts.
    statements_ : list of ShareStatement
        Their signed statements, forwarded to the data user.
    intake_cpu_s_ : float
        CPU seconds spent taking shares in (:meth:`receive_share`,
        :meth:`receive_shares`): this process's (every thread's, the pool's
        own threads included) plus the pool workers' time in
        :func:`~dpdpca.protocol.intake.intake_kernel`.  A benchmark figure,
        less stretched by other load on the machine than wall time.
    """

    def __init__(self, params: ProtocolParams, owner_keys: OwnerKeyring, *, quorum: int | None = None,
                 executor: EngineLike = None, ledger: ReleaseLedger | None = None,
                 max_features: int = DEFAULT_MAX_FEATURES, record_noise_for_testing: bool = False,
                 release: str = "add-remove", range_proofs: bool = False, range_proof_mode: str = "slack") -> None:
        if not isinstance(owner_keys, OwnerKeyring) or len(owner_keys) == 0:
            raise ProtocolError(f"owner_keys must be a non-empty OwnerKeyring (the owners' verify keys), "
                                f"got {type(owner_keys).__name__}")
        self.params = params
        self.owner_keys = owner_keys
        self.quorum = len(owner_keys) if quorum is None else check_int("quorum", quorum, minimum=1,
                                                                        maximum=params.max_owners)
        if self.quorum > len(owner_keys):
            raise param_error("quorum", f"<= the number of listed owners ({len(owner_keys)})", quorum)
        self.executor = executor
        self.ledger = ReleaseLedger() if ledger is None else ledger
        self.max_features = check_int("max_features", max_features, minimum=1)
        self.record_noise_for_testing = bool(record_noise_for_testing)
        self.release = params.check_release(release)
        self.timings_ = Timings()
        self.party = "proxy"
        self.d: int | None = None
        self._shares: dict[str, dict[str, EncryptedArray]] = {}
        self._statements: dict[str, ShareStatement] = {}
        self._partials: list[dict[str, Any]] = []  # sums of shares checked on the pool
        self._running: dict[str, Any] | None = None  # the accepted shares' sum so far (scheme.sums_at_intake)
        self._seen: set[bytes] = set()
        self._aggregate: dict[str, EncryptedArray] | None = None
        self.owners_: list[str] = []
        self.statements_: list[ShareStatement] = []
        self.n_: int | None = None
        self.range_proofs = bool(range_proofs)
        self.range_proof_mode = check_range_proof_mode(range_proof_mode)
        if self.range_proofs and not params.scheme.range_proofs:
            raise param_error("range_proofs", f"False with scheme {params.scheme.name!r} (the range proofs are for "
                              f"packed Paillier shares)", range_proofs)
        self.excluded_: dict[str, str] = {}  # owner id -> why (a failed range proof)
        # CPU seconds spent taking shares in: this process's, and its pool workers' (intake_kernel's own count)
        self.intake_cpu_s_ = 0.0
        # The release's rerandomizers: r^n (centred), or DJN factors under a base the proxy draws (add/remove);
        # none for BFV (no offline factors: the binding draws each encryption's randomness itself).
        self._randomizers: RandomizerPool | None = None
        if params.scheme.offline_factors:
            self._randomizers = (RandomizerPool(params.public_key.with_own_base(), method="djn")
                                 if self.release.rerandomizer == "djn" else RandomizerPool(params.public_key))
        self._prepared = False
        # Add/remove: the proxy's noise drawn ahead for one privacy setting (used once, then dropped).
        self._release_setting: ReleaseOptions | None = None
        self._release_owners: int | None = None  # L for that setting (owners' noise), default the listed owners
        self._ready_noise: tuple[tuple[Any, ...], dict[str, list[int]]] | None = None
        self._ready_calibration: tuple[tuple[Any, ...], ReleaseNoise] | None = None
        self._noise_thread: threading.Thread | None = None
        # BFV: the release's encryptions of 0 and flood made ahead (scheme.release_zeros), used once
        self._release_zeros: Any = None
        self._zeros_thread: threading.Thread | None = None
        # ... and, once both are made, the noise folded into them: (its setting's key, section lengths)
        self._folded: tuple[tuple[Any, ...], dict[str, int]] | None = None
        self._fold_lock = threading.Lock()
        self._context_loads: list[Future[tuple[int, float]]] = []  # the pool workers loading the intake context
        self._context_blob: bytes | None = None  # the intake context's bytes, made once (offline, at prepare)

    # -- round 1 ------------------------------------------------------------
    def receive_share(self, data: bytes) -> str:
        """Accept one owner's signed share; return its owner id.

        The checks that need no session state are
        :func:`~dpdpca.protocol.intake.check_share`'s; the bookkeeping
        (late, duplicate, ``max_owners``, one d, replay) is this proxy's.

        Raises
        ------
        MessageError
            Truncated or tampered bytes, a layout, bound or section size that
            is not the public one for the declared d; or (BFV) ciphertexts
            that cancel those accepted so far, so that their sum would be
            transparent (colluding owners, one sending the others' ciphertexts
            negated: the share completing the cancellation is refused, the
            session goes on).
        KeyMismatchError
            A share under another key.
        AuthenticationError
            No valid signature by a listed owner over this session, key,
            owner id, d, count and these ciphertexts; or, with range proofs,
            none by the owner over its proof section (the owner is not
            excluded: it may send its share again).
        ProofError
            With range proofs, a proof its owner signed that does not verify
            (``exc.party``: the owner, now excluded), or a share of an
            excluded owner.
        ProtocolError
            A duplicate owner id, a ciphertext already received in another
            share (a replay under a new id), another session, a share
            arriving after the collection closed (late), or, when the proxy
            knows its release setting (:meth:`expect_release`), a share whose
            signed noise label is not the session's (:meth:`statement_noise`;
            the owner is not excluded: it may send a share with the session's
            noise).
        OverflowRiskError
            More owners than ``max_owners`` (the declared slot width).
        DataError
            An owner with a different number of features d, or d above ``max_features``.
        """
        start = time.process_time()
        try:
            return self._receive_one(data)
        finally:
            self.intake_cpu_s_ += time.process_time() - start

    def _receive_one(self, data: bytes) -> str:
        try:
            share = check_share(data, self._intake_context(), d_expected=self.d)
        except ProofError as exc:
            self._exclude(exc)
            raise
        if self.params.scheme.sums_at_intake:  # added before the bookkeeping, as a pool worker's chunk sum is
            running = self._plus_running({name: share.arrays[name] for name in self.release.sections})
            self._admit(share.owner, share.d, share.statement, share.keys)
            self._running = running
        else:
            self._admit(share.owner, share.d, share.statement, share.keys)
            self._shares[share.owner] = share.arrays
        return share.owner

    def _plus_running(self, arrays: dict[str, Any]) -> dict[str, Any]:
        """The running intake sum plus ``arrays`` (a share or a chunk's sum); MessageError where the scheme refuses
        the sum (BFV: transparent, :func:`~dpdpca.protocol.intake.add_each`), the running sum unchanged."""
        if self._running is None:
            return arrays
        return self.params.scheme.sum_sections([self._running, arrays])

    def receive_shares(self, datas: Iterable[bytes], *, expected: int | None = None) -> list[str | DpdpcaError]:
        """Accept a batch of shares; per share, in order, its owner id or the error that refused it.

        With a local process pool as ``executor`` (an
        :class:`~dpdpca.crypto.compute.ExecutorEngine`), chunks of shares are
        checked and summed in its workers while ``datas`` is still being
        read (:func:`~dpdpca.protocol.intake.intake_kernel`; under a scheme
        whose shares cost more to copy than to check, BFV, in as many threads
        of this process, which overlap only the hashing and the signature
        check, the parts that release the GIL:
        :func:`~dpdpca.protocol.intake.check_and_sum`), and only the
        bookkeeping stays here: Wang & Chang's proxy aggregating "in
        parallel", under either scheme.  A share the bookkeeping refuses
        after its worker summed it in is taken out again (Paillier: times
        its inverse modulo n**2; BFV: its ciphertexts subtracted).
        Otherwise, one :meth:`receive_share` after the other.  The
        outcome is the same either way: the same shares accepted, the same
        errors, the same aggregate.

        Parameters
        ----------
        datas : iterable of bytes
            Consumed lazily, so reading overlaps the checks.
        expected : int or None
            How many shares to expect (sizes the chunks).
        """
        engine = as_engine(self.executor)
        start = time.process_time()
        if self._aggregate is not None or not isinstance(engine, ExecutorEngine) or not self.params.scheme.pooled_intake:
            try:
                return [self._try(self._receive_one, data) for data in datas]
            finally:
                self.intake_cpu_s_ += time.process_time() - start
        sizes = intake_chunk_sizes(expected, engine.workers)
        in_threads = self.params.scheme.intake_in_threads
        # threads share this process's context; processes get its bytes (each worker loads it once per session)
        context: Any = self._intake_context() if in_threads else self._intake_context_bytes()
        kernel: Any = check_and_sum if in_threads else intake_kernel
        futures: list[tuple[Future[Any], list[bytes]]] = []  # each chunk's bytes are kept: the keys are read there
        out: list[str | DpdpcaError] = []
        workers_cpu = 0.0
        pool: Any = intake_threads(engine.workers) if in_threads else engine.executor
        chunk: list[bytes] = []
        for data in datas:
            chunk.append(bytes(data))
            if len(chunk) >= _next_size(sizes, len(futures)):
                futures.append((pool.submit(kernel, context, self.d, chunk), chunk))
                chunk = []
        if chunk:
            futures.append((pool.submit(kernel, context, self.d, chunk), chunk))
        for future, sent in futures:
            if in_threads:  # their CPU time is this process's
                verdicts, sums = future.result()
            else:
                verdicts, sums, cpu_s = future.result()
                workers_cpu += cpu_s
            out.extend(self._admit_chunk(verdicts, sums, sent, loaded=in_threads))
        self.intake_cpu_s_ += time.process_time() - start + workers_cpu
        self._time_context_loads()  # done by now: queued before the first chunk
        return out

    @staticmethod
    def _try(step: Any, data: bytes) -> str | DpdpcaError:
        try:
            return step(data)  # type: ignore[no-any-return]
        except DpdpcaError as exc:
            return exc

    def _intake_context(self) -> IntakeContext:
        return IntakeContext(self.params, self.owner_keys, self.release, self.max_features, self.range_proofs,
                             self.range_proof_mode)

    def _intake_context_bytes(self) -> bytes:
        """:meth:`_intake_context` as the bytes a pool worker loads, serialized once per proxy: the context is
        fixed when the proxy is made (0.6 ms at d = 57, paid by :meth:`prepare`, not by each batch of shares)."""
        if self._context_blob is None:
            self._context_blob = self._intake_context().to_bytes()
        return self._context_blob

    def _exclude(self, exc: ProofError) -> None:
        """Log a failed range proof and exclude its owner from the rest of the session."""
        if exc.party is not None:
            self.excluded_.setdefault(exc.party, str(exc))
            _log.warning("refused and excluded from session %s: %s", self.params.session_id, exc)

    def _with_proof_note(self, report: Any) -> Any:
        notes = f"{report.notes}; {self.proof_note()}" if report.notes else self.proof_note()
        return dataclasses.replace(report, notes=notes)

    def proof_note(self) -> str:
        """What the privacy report says about range proofs (:mod:`dpdpca.protocol.proofs`)."""
        if not self.range_proofs:
            return "range proofs: off (owners' shares were not proved within the declared bounds)"
        excluded = f"; excluded owners: {', '.join(sorted(self.excluded_))}" if self.excluded_ else ""
        if self.range_proof_mode == "exact":
            return (f"range proofs: on, mode exact (every aggregated share proved every slot within its exact "
                    f"declared interval, dpdpca.crypto.bitproof){excluded}")
        return (f"range proofs: on, mode slack (every aggregated share proved every slot within the proven bounds of "
                f"dpdpca.crypto.rangeproof, N exactly){excluded}")

    def _admit(self, owner: str, d: int, statement: ShareStatement, keys: list[bytes]) -> None:
        """The proxy's bookkeeping for a share that passed :func:`check_share`; raises if it is refused."""
        p = self.params
        if self._aggregate is not None:
            raise ProtocolError(f"share of owner {owner} must arrive before the collection closes, got it late")
        if owner in self.excluded_:
            exc = ProofError(f"owner {owner!r} is excluded from this session (its range proof failed)")
            exc.party = owner
            raise exc
        if owner in self._statements:
            raise ProtocolError(f"owner id must be unique, got a duplicate or replayed share from owner {owner!r}")
        if len(self._statements) >= p.max_owners:
            raise OverflowRiskError(f"owners must be <= max_owners={p.max_owners} (the declared slot width), "
                                    f"got share number {len(self._statements) + 1}")
        if self.d is not None and d != self.d:
            raise DataError(f"owners must all have d={self.d} features, got d={d} from owner {owner!r}")
        if not self._seen.isdisjoint(keys):
            raise ProtocolError(f"ciphertexts must be fresh, got owner {owner!r} resending ciphertexts already "
                                f"received in another share (a replay)")
        expected = self.expected_statement_noise()  # known when a launcher said the setting (ProxySteps, the service)
        if expected is not None:
            # finish's own check, made on arrival: one share with another label (another epsilon, delta, L, t or
            # quorum, or the wrong kind) must not make the session unreleasable.  Nothing of the share is kept
            # (not its owner, not its ciphertexts): the owner may send a share with the session's noise.
            check_noise_statements([statement], expected)
        self._seen.update(keys)
        self.d = d
        self._statements[owner] = statement
        self.prepare(d, wait=False)

    def _admit_chunk(self, verdicts: list[tuple[Any, ...]], sums: dict[int, dict[str, Any]],
                     datas: list[bytes], *, loaded: bool = False) -> list[str | DpdpcaError]:
        """Bookkeeping for one chunk checked by :func:`intake_kernel` (or, ``loaded``, by
        :func:`~dpdpca.protocol.intake.check_and_sum` in a thread: its sums are arrays, not bytes); keeps its sum
        of accepted shares.

        A share its worker summed in but the bookkeeping refuses (a duplicate
        owner, a replay, a late share...) is taken out of the sum again
        (:meth:`~dpdpca.crypto.CipherScheme.take_out`), from its own bytes.
        Under a scheme that :attr:`~dpdpca.crypto.CipherScheme.sums_at_intake`
        (BFV) the chunk's sum is then added to the running sum; where the
        scheme refuses a sum here (BFV: transparent, the chunk's shares cancel
        those before them), the chunk's admitted shares are added again one at
        a time from their bytes and the one completing the cancellation is
        refused (:func:`~dpdpca.protocol.intake.add_each`), as in the serial
        intake.
        """
        p = self.params
        scheme = p.scheme
        out: list[str | DpdpcaError] = []
        summed: dict[int, int] = {}
        refused: dict[int, list[bytes]] = {}  # passed the worker, refused here: taken out below
        admitted: dict[int, list[tuple[int, bytes, str, list[bytes]]]] = {}  # d -> (index in out, bytes, owner, keys)
        for verdict, data in zip(verdicts, datas):
            if verdict[0] != "ok":
                exc = error_from(*verdict[1:])
                if isinstance(exc, ProofError):
                    self._exclude(exc)
                out.append(exc)
                continue
            _, owner, d, statement, ref, key_width = verdict
            summed[d] = summed.get(d, 0) + 1
            keys = keys_from_ref(data, ref, key_width)
            try:
                self._admit(owner, d, ShareStatement.from_json(statement), keys)
            except DpdpcaError as exc:
                out.append(exc)
                refused.setdefault(d, []).append(data)
                continue
            admitted.setdefault(d, []).append((len(out), data, owner, keys))
            out.append(owner)

        def load(data: bytes, d: int) -> dict[str, Any]:  # it passed its worker's checks
            share = load_share_arrays(Message.from_bytes(data), p, d, owners=1, release=self.release, check_units=False)
            return {name: share[name] for name in self.release.sections}

        for d, part in sums.items():
            if not admitted.get(d):
                continue  # every share of this d was refused here
            chunks = self.release.share_chunks(d, p.layout.slots)
            bounds = {name: b * summed[d] for name, b in p.share_bounds(self.release).items()}
            total: dict[str, Any] | None
            try:
                total = part if loaded else scheme.intake_from_bytes(part, p.public_key, layout=p.layout,
                                                                     chunks=chunks, bounds=bounds)
                for data in refused.get(d, []):
                    total = scheme.take_out(total, load(data, d))
                if scheme.sums_at_intake:
                    total = self._plus_running(total)
            except MessageError:
                # a sum the scheme refuses (BFV: transparent, these shares cancel those before them): the chunk's
                # admitted shares again, one at a time, and the one that completes the cancellation is refused
                start = self._running if scheme.sums_at_intake else None
                total, culprits = add_each(scheme, start, [(entry, load(entry[1], d)) for entry in admitted[d]])
                for (index, _, owner, keys), why in culprits:
                    del self._statements[owner]
                    self._seen.difference_update(keys)
                    out[index] = why
            if scheme.sums_at_intake:
                self._running = total
            elif total is not None:
                self._partials.append(total)
        return out

    def expect_release(self, setting: ReleaseOptions | None = None, *, owners: int | None = None,
                       **finish_options: Any) -> None:
        """Say which release :meth:`finish` will make (its setting, or its keywords, and L as ``owners``), so
        :meth:`prepare` can draw its noise ahead and the intake refuses a share whose signed noise label is not
        the session's (:meth:`expected_statement_noise`).

        ``owners`` must be the L that :meth:`finish` will be given (:class:`~dpdpca.protocol.roles.ProxySteps`
        passes the same to both).  A proxy never told its setting (``dpdpca proxy aggregate``, which takes no
        privacy options) checks the labels at :meth:`finish` only.
        """
        self._release_setting = self._expected_setting(setting, finish_options)
        self._release_owners = None if owners is None else check_int("owners", owners, minimum=1)

    def statement_noise(self, setting: ReleaseOptions, *, owners: int | None = None) -> str:
        """What every share statement of this session must say about its noise under ``setting``.

        ``"none"`` (the proxy adds the noise), or the owners' noise label for
        the setting, L = ``owners`` (default the listed owners) and this
        proxy's quorum (:func:`~dpdpca.protocol.add_remove.session_noise_label`).
        The one label both checks compare with: the intake's (when the setting
        is known while collecting) and :meth:`finish`'s.
        """
        return add_remove.session_noise_label(setting, owners=self._owners(owners), quorum=self.quorum)

    def expected_statement_noise(self) -> str | None:
        """:meth:`statement_noise` of the setting :meth:`expect_release` gave, or None when none was given (the
        intake then leaves the noise labels to :meth:`finish`)."""
        if self._release_setting is None:
            return None
        return self.statement_noise(self._release_setting, owners=self._release_owners)

    def _owners(self, owners: int | None) -> int:
        """L: ``owners`` as given, default the number of listed owners."""
        return len(self.owner_keys) if owners is None else check_int("owners", owners, minimum=1)

    def _expected_setting(self, setting: ReleaseOptions | None, options: dict[str, Any]) -> ReleaseOptions | None:
        """The setting given, or built (validated once) from :meth:`finish`'s keywords, or the expected one."""
        options = {k: v for k, v in options.items() if k != "owners"}
        if setting is not None or options.get("epsilon") is not None:
            return self.setting(setting, **options)
        return self._release_setting

    def prepare(self, d: int, *, wait: bool | None = None, setting: ReleaseOptions | None = None,
                **finish_options: Any) -> None:
        """Make the release's data-independent work while the collection is open (offline work).

        The rerandomizers depend on the key and d only
        (the release's ``result_ciphertexts``): ``r^n`` for the centred release,
        DJN factors ``hs'^alpha`` under the proxy's own base for the
        add/remove release.  With the privacy setting (:meth:`finish`'s
        keywords or ``setting`` here, or from :meth:`expect_release`; ``noise_by="proxy"``)
        the add/remove release's noise is drawn now too; the centred
        release's noise and mask depend on N, known only at the close, so
        they stay online.  ``wait``: do it all now (True), in background
        threads (False), or by default ``r^n`` in the background (gmpy2
        releases the GIL, so it uses a second core while owners encrypt)
        and the rest now (the DJN table lookups and the noise sampler hold
        the GIL), but the noise in the background when an ``executor`` makes
        the DJN factors in its processes meanwhile.  BFV has no factors: its
        release's encryption of 0 and noise flood
        (:meth:`~dpdpca.crypto.CipherScheme.release_zeros`, sized for
        ``max_owners`` shares) are made now, or in the background with
        ``wait=False`` (the binding holds the GIL).  Everything made here is timed as ``precompute`` (the
        noise: ``precompute_noise``, thread CPU time) and used
        once by :meth:`finish`, which draws fresh values for anything not
        made or made for another setting.  Called on the first accepted
        share (in the background); a launcher that knows d earlier calls it
        sooner.  Idempotent.
        """
        if self._prepared:
            return
        self._load_intake_context()
        d = check_features(check_int("d", d, minimum=1), self.max_features)
        setting = self._expected_setting(setting, finish_options)
        count = self.release.result_ciphertexts(d, self.params.layout.slots, self.params.v2_layout.slots)
        if setting is not None and self.release.noise_before_close and setting.noise_by == "proxy":
            def draw() -> None:
                start = time.thread_time()
                noise = self.release.calibrate(setting, d=d, frac_bits=self.params.frac_bits, kappa=self.params.kappa)
                self._ready_calibration = (_noise_key(setting, d), noise)  # price() reuses it: no calibration online
                self._ready_noise = (_noise_key(setting, d), add_remove.proxy_noise(noise.calibration, self.params))
                self.timings_.add(self.party, "precompute_noise", time.thread_time() - start)
                self._fold_noise()
            # By default too when the rerandomizers below go to other processes (an executor): this
            # thread waits on them meanwhile, so the sampler would otherwise leave a core idle first.
            if wait is False or (wait is None and self.executor is not None):
                self._noise_thread = threading.Thread(target=draw, name="dpdpca-noise", daemon=True)
                self._noise_thread.start()
            else:
                draw()
        if self._randomizers is not None:
            now = bool(wait) or (wait is None and self._randomizers.method == "djn")
            self._randomizers.fill(count, wait=now, executor=self.executor if now else None)
        else:  # BFV: the release's encryptions of 0 and its flood, sized for max_owners shares and the noise
            values = self.release.share_value_count(d, self.params.layout.slots)

            def make_zeros() -> None:
                start = time.thread_time()
                self._release_zeros = self.params.scheme.release_zeros(self.params.public_key, values,
                                                                       additions=self.params.max_owners + 1)
                self.timings_.add(self.party, "precompute", time.thread_time() - start)
                self._fold_noise()
            if wait is False:  # by default now: the binding holds the GIL, a thread would contend with intake
                self._zeros_thread = threading.Thread(target=make_zeros, name="dpdpca-zeros", daemon=True)
                self._zeros_thread.start()
            else:
                make_zeros()
        self._prepared = True

    def _load_intake_context(self) -> None:
        """Have each worker of a local pool load the intake's context now (:func:`~dpdpca.protocol.intake.load_context`).

        Offline: the key and the public parameters, not any share.  Its cost
        is timed as ``precompute`` when the intake ends (per worker process,
        the largest: they load side by side).
        """
        engine = as_engine(self.executor)
        if (self._context_loads or self._statements or not isinstance(engine, ExecutorEngine)
                or not self.params.scheme.pooled_intake):
            return  # already asked, or the intake is under way (prepare() called by the first share): too late
        if self.params.scheme.intake_in_threads:  # this process's context; its threads started now
            intake_threads(engine.workers)
            return
        blob = self._intake_context_bytes()
        self._context_loads = [engine.executor.submit(load_context, blob) for _ in range(engine.workers)]

    def _time_context_loads(self) -> None:
        per_worker: dict[int, float] = {}
        for future in self._context_loads:
            pid, cpu_s = future.result()
            per_worker[pid] = per_worker.get(pid, 0.0) + cpu_s
        if per_worker:
            self.timings_.add(self.party, "precompute", max(per_worker.values()))
        self._context_loads = []

    def _join_noise(self) -> None:
        """Wait for the noise :meth:`prepare` draws in the background, if any."""
        if self._noise_thread is not None:
            self._noise_thread.join()
            self._noise_thread = None

    def _fold_noise(self) -> None:
        """BFV: the noise drawn ahead folded into the release's zeros made ahead, once both exist (offline).

        The release then adds one ciphertext (the aggregate plus zeros plus
        noise, in numpy) instead of a plaintext addition through the binding.
        Timed as ``precompute``.
        """
        if not self.params.scheme.folds_plain:
            return
        with self._fold_lock:
            if self._folded is not None or self._release_zeros is None or self._ready_noise is None:
                return
            start = time.thread_time()
            key, draws = self._ready_noise
            lengths = {name: len(draws[name]) for name in self.release.sections}
            self.params.scheme.fold_plain_sections(self._release_zeros, draws, lengths,
                                                   plain_bound=self.params.noise_allowance)
            self._folded = (key, lengths)
            self.timings_.add(self.party, "precompute", time.thread_time() - start)

    def _folded_for(self, key: tuple[Any, ...] | None, lengths: dict[str, int] | None = None) -> bool:
        """Whether the release's zeros carry the noise drawn ahead for ``key`` (and these section lengths).

        Zeros carrying another setting's noise (or any, with ``key`` None: this
        release uses no noise drawn ahead) are dropped here, never used: the
        release then makes its own.
        """
        if self._zeros_thread is not None:
            self._zeros_thread.join()
            self._zeros_thread = None
        folded, self._folded = self._folded, None
        if folded is not None and folded != (key, lengths):
            self._release_zeros = None
            return False
        return folded is not None

    def _noise_drawn_ahead(self, key: tuple[Any, ...]) -> dict[str, list[int]] | None:
        """The add/remove noise :meth:`prepare` drew for this setting, handed out once (None otherwise)."""
        self._join_noise()
        ready, self._ready_noise = self._ready_noise, None
        return ready[1] if ready is not None and ready[0] == key else None

    def _rerandomize(self, *arrays: EncryptedArray) -> list[EncryptedArray]:
        """Multiply every outgoing ciphertext by a fresh encryption of 0.

        Centred release: ``r^n`` with ``r`` uniform in Z*_n (ready ones from
        :meth:`prepare` first), because the mask's exponents ``b`` act on the
        owners' randomness and the key holder reads randomness.  Add/remove
        release: the proxy applies no secret exponent (its noise is a
        plaintext addend, ``c (1 + G n)``), so the outputs' randomness is the
        owners' product times this factor whatever the factor is, and a DJN
        factor ``hs^alpha`` under the proxy's own base
        (:meth:`~dpdpca.crypto.PublicKey.with_own_base`) hides G from anyone
        without the secret key who saw the owners' ciphertexts.
        """
        scheme = self.params.scheme
        if self._randomizers is None:  # BFV: a public-key encryption of 0 and a flood added to each ciphertext
            # (rerandomize_sections: once for a packed share's sections, which are views of one array), made by
            # prepare() if it fits this aggregate, else now; used once either way
            if self._zeros_thread is not None:
                self._zeros_thread.join()
                self._zeros_thread = None
            ready, self._release_zeros = self._release_zeros, None
            fresh = scheme.rerandomize_sections({str(i): a for i, a in enumerate(arrays)}, self.params.public_key,
                                                executor=self.executor, ready=ready)
            return list(fresh.values())
        pool = self._randomizers
        count = sum(len(a.ciphertexts) for a in arrays)
        ready = pool.take_ready(count)
        self.timings_.add(self.party, "precompute", pool.cpu_s)
        method = pool.method
        # The rest (none if prepare() finished) under the same base: the proxy's own for DJN.
        base = pool.public_key if method == "djn" else None
        out = []
        try:
            for a in arrays:
                mine, ready = ready[:len(a.ciphertexts)], ready[len(a.ciphertexts):]
                out.append(a.rerandomize(method=method, executor=self.executor, factors=mine, base=base))
        finally:
            pool.close()  # forgets every factor not handed out, and the own base's table
        return out

    def _windows(self, v: EncryptedArray, d: int) -> EncryptedArray:
        """``E[W_a]``, ``W_a = v[a : min(a + slots, d)]`` for ``a = 0..d-1``, packed from the one-slot ``E[v_j]``.

        Horner's rule (:meth:`~dpdpca.crypto.EncryptedArray.repack`): about
        ``d * slots * slot_bits`` squarings modulo n**2, once per session on
        the aggregate.  Version 2 shares carried the windows as a second
        encoding of v, which nothing tied to the first: an owner colluding
        with the data user could send them different and let the user undo
        the mask (docs/threat-model.md).
        """
        sizes = window_chunks(d, self.params.layout.slots)
        singles = v.select([a + j for a, size in enumerate(sizes) for j in range(size)])
        with self.timings_.measure(self.party, "windows"):
            return singles.repack(self.params.layout, chunks=sizes, executor=self.executor)

    @property
    def received(self) -> list[str]:
        """Owner ids whose shares were accepted, in arrival order."""
        return list(self._statements)

    def close_collection(self) -> int | None:
        """Aggregate (Alg. 1 lines 2-4); return N, the sum of the accepted owners' signed counts.

        None for the add/remove release (N is private and travels encrypted).

        Late or missing owners are simply not in the aggregate.

        Raises
        ------
        ProtocolError
            Fewer shares than the quorum, or called twice.
        DataError
            Fewer than 2 rows in total (the centred scatter is then identically 0).
        """
        if self._aggregate is not None:
            raise ProtocolError("close_collection must be called once, got a second call")
        if len(self._statements) < self.quorum:
            raise ProtocolError(f"shares must reach the quorum of {self.quorum}, got {len(self._statements)}")
        n = None
        if self.release.counted:
            n = sum(int(st.n_rows or 0) for st in self._statements.values())
            if n < 2:
                raise DataError(f"rows in total must be >= 2 (the centred scatter of one row is 0), got {n}")
        with self.timings_.measure(self.party, "aggregate"):
            shares = [*self._shares.values(), *self._partials, *([] if self._running is None else [self._running])]
            # a few products (the pool's partial products, or a few shares) cost less here than a pool round trip
            mulmods = (len(shares) - 1) * sum(len(a.chunks) for a in shares[0].values()) if shares else 0
            executor = self.executor if mulmods >= POOL_MIN_MULMODS else None
            self._aggregate = self.params.scheme.sum_sections(
                [{key: s[key] for key in self.release.sections} for s in shares], executor=executor)
            self.owners_ = list(self._statements)
            self.statements_ = [self._statements[o] for o in self.owners_]
            self.n_ = n
            self._shares.clear()  # individual shares are no longer needed
            self._partials.clear()
            self._running = None
            self._seen.clear()
        return n

    # -- the file CLI keeps the aggregate between two invocations ----------------
    def state_bytes(self) -> bytes:
        """The aggregated ciphertexts and signed counts as a ``PROXY_STATE`` message (file CLI)."""
        if self._aggregate is None:
            raise ProtocolError("state_bytes needs a closed collection, got none")
        p = self.params
        return Message(MessageType.PROXY_STATE, p.session_id, p.key_fingerprint, self.party,
                       meta={"owners": self.owners_, "d": self.d, "release": str(self.release), "quorum": self.quorum,
                             "statements": [st.to_json() for st in self.statements_],
                             "range_proofs": self.range_proofs, "range_proof_mode": self.range_proof_mode,
                             "excluded": dict(self.excluded_)},
                       sections=p.scheme.sections_bytes(self._aggregate)).to_bytes()

    @classmethod
    def from_state(cls, params: ProtocolParams, owner_keys: OwnerKeyring, data: bytes, *,
                   executor: EngineLike = None, ledger: ReleaseLedger | None = None,
                   max_features: int = DEFAULT_MAX_FEATURES) -> "Proxy":
        """Rebuild a proxy whose collection is closed from :meth:`state_bytes`; re-checks every signature."""
        msg = Message.from_bytes(data).expect(MessageType.PROXY_STATE, session=params.session_id,
                                              key_fingerprint=params.key_fingerprint)
        d = params.check_d(check_features(msg.meta_int("d", minimum=1), max_features), who="the proxy state")
        release = as_release(msg.meta.get("release", CENTRED))  # a state without the field predates add/remove
        statements, n = release.check_statements(msg.meta.get("statements"), owner_keys, session=params.session_id,
                                                 key_fingerprint=params.key_fingerprint, d=d,
                                                 max_owners=params.max_owners,
                                                 max_rows_per_owner=params.max_rows_per_owner)
        owners = [st.owner_id for st in statements]
        if msg.meta.get("owners") != owners:
            raise MessageError(f"proxy state owners must be those of its statements {owners}, "
                               f"got {str(msg.meta.get('owners'))[:200]}")
        # the collection's quorum sizes the owners' noise (add_remove.owner_noise_label): kept in the state
        quorum = msg.meta_int("quorum", minimum=1) if "quorum" in msg.meta else 1
        proxy = cls(params, owner_keys, quorum=min(quorum, len(owner_keys)), executor=executor, ledger=ledger,
                    max_features=max_features, release=release, range_proofs=msg.meta.get("range_proofs") is True,
                    range_proof_mode=msg.meta.get("range_proof_mode", "slack"))
        excluded = msg.meta.get("excluded", {})
        if not isinstance(excluded, dict):
            raise MessageError(f"proxy state excluded must be an object, got {type(excluded).__name__}")
        proxy.excluded_ = {str(k)[:64]: str(v)[:400] for k, v in excluded.items()}
        proxy._aggregate = load_share_arrays(msg, params, d, owners=len(owners), release=release)
        proxy.owners_, proxy.d, proxy.statements_, proxy.n_ = owners, d, statements, n
        return proxy

    # -- round 4 ------------------------------------------------------------
    def setting(self, setting: ReleaseOptions | None = None, **options: Any) -> ReleaseOptions:
        """The frozen privacy setting of this release: ``setting`` as given, or built (validated) from ``options``.

        The boundary where the setting is checked, once; a setting for another
        release than this proxy's is refused.
        """
        if setting is None:
            setting = ReleaseOptions(**{"release": self.release, **options})
        elif options:
            raise param_error("options", "empty when a setting is given", sorted(options))
        if setting.release != self.release:
            raise param_error("release", f"{str(self.release)!r}, the release of this proxy's shares",
                              setting.release)
        return setting

    def price(self, setting: ReleaseOptions, *, owners: int | None = None) -> ReleaseNoise:
        """The calibrated noise of this session's release: the noise :meth:`finish` draws and its cost.

        Needs the closed collection (d, and N for the centred release), never
        the data; nothing is drawn.
        """
        if self._aggregate is None:
            raise ProtocolError("finish must follow close_collection, got it first")
        n_owners = self._owners(owners)
        setting.check_owners(owners=n_owners, quorum=self.quorum)  # owners' noise: t <= L and Q > L - t
        if self.n_ is not None:  # N is known (the centred release): delta must also be < 1/N
            check_delta("delta", setting.delta, n_rows=int(self.n_))
        p = self.params
        d = int(self.d or 0)
        if self.release.noise_before_close and setting.noise_by == "proxy":
            # the proxy's add/remove calibration depends on the setting and d only: made ahead by prepare()
            self._join_noise()
            ready = self._ready_calibration
            if ready is not None and ready[0] == _noise_key(setting, d):
                return ready[1]
        return self.release.calibrate(setting, d=d, frac_bits=p.frac_bits, kappa=p.kappa, n=self.n_,
                                      owners=n_owners, quorum=self.quorum, present=len(self.owners_))

    def finish(self, setting: ReleaseOptions | None = None, *, owners: int | None = None,
               ledger: PrivacyLedger | None = None, label: str = "", **options: Any) -> bytes:
        """Add the DP noise under encryption and release, once (Alg. 1 lines 6-11, or the add/remove release).

        Prices, checks, runs and records the release in one call: the noise is
        calibrated first (:meth:`price`), a ``ledger`` refuses it past its
        budget before anything is drawn, the release object draws that same
        noise and builds the message, and the ledger records the same cost.

        Parameters
        ----------
        setting : ReleaseOptions or None
            The frozen privacy setting; None builds it from ``options``
            (``epsilon``, ``delta``, ``calibration``, ``sensitivity_mode``,
            ``noise_lattice``, ``noise_by``, ``honest_owners``), validated once.
            Centred release: ``"rigorous"`` sensitivity is
            :func:`dpdpca.dp.centred_scatter_sensitivity` under replace-one,
            ``"paper"`` Wang & Chang's Delta = 1; ``noise_lattice="n-scaled"``
            (rigorous) calibrates G'' to ``N * S_int``, ``"integer"`` (the
            paper's form) adds ``N * G'`` and is NOT DP (the user learns
            ``v_i v_j mod N``).  The reported delta adds the mask's
            total-variation term.
        owners : int or None
            L for owners' noise (default the number of listed owners).
        ledger : PrivacyLedger or None
            A budget ledger (:class:`dpdpca.dp.PrivacyLedger`): the release's
            cost is checked against it before the noise is drawn and recorded
            after the release is built (:attr:`ledger_entry_`).
        label : str
            The ledger entry's label.

        Returns
        -------
        bytes
            The ``MASKED_RESULT`` message for the data user.

        Raises
        ------
        ParameterError
            An option out of range, or a setting for another release.
        BudgetExceededError
            The release would pass ``ledger``'s budget (nothing was drawn).
        OverflowRiskError
            The noise for this epsilon/delta exceeds the declared allowance, or a
            drawn sample does (probability < 2**-80).
        ProtocolError
            Called before the collection closed, or a second time for this
            session (the session ledger already holds a release; this survives
            the process when the ledger is a file).
        """
        setting = self.setting(setting, **options)
        noise = self.price(setting, owners=owners)
        noise = dataclasses.replace(noise, report=self._with_proof_note(noise.report))  # says if shares were proved
        if self.ledger.is_released(self.params.session_id):  # early, before any expensive work
            raise ProtocolError(f"session {self.params.session_id} must be released once, got a second release "
                                f"(the ledger holds one)")
        # The report promises this noise: every share must say it holds exactly its part of it (owners' noise),
        # or none (the proxy's): noiseless shares under an owners'-noise report would release exact values.
        # (With the setting known while collecting, the intake already refused any other label.)
        check_noise_statements(self.statements_, self.statement_noise(setting, owners=owners))
        if ledger is None:
            out = self.release.finish(self, noise)
        else:  # under the ledger's lock: another session sharing the budget cannot pass between check and record
            cost = noise.cost(label=label or f"dpdpca session {self.params.session_id}")
            with ledger.transaction():
                ledger.check(cost)
                out = self.release.finish(self, noise)
                self.ledger_entry_ = ledger.record(cost)
        self.privacy_ = noise.report
        return out

    def _claim(self, out: bytes) -> bytes:
        # Recorded before the release leaves the proxy: a crash can lose it, never duplicate it.
        self.ledger.claim(self.params.session_id, role="proxy", digest=hashlib.sha256(out).hexdigest())
        return out

    def _finish_centred(self, noise: ReleaseNoise) -> bytes:
        """The centred release: mask, G'' and rerandomization under encryption (:class:`CentredRelease`)."""
        assert self._aggregate is not None and self.n_ is not None
        setting, mech = noise.setting, noise.calibration
        p, n, d = self.params, self.n_, int(self.d or 0)
        f = p.frac_bits
        agg = self._aggregate
        slots = p.layout.slots

        with self.timings_.measure(self.party, "noise"):
            factor = n if setting.noise_lattice == "integer" else 1
            p.check_noise_fits(float(mech.sigma) * factor, epsilon=setting.epsilon)
            draws = [int(g) * factor for g in mech.sample_symmetric_upper(d)]
            if draws and max(abs(g) for g in draws) > p.noise_allowance:
                raise OverflowRiskError(f"noise sample must be <= the allowance {p.noise_allowance}, "
                                        f"got {max(abs(g) for g in draws)} (a 2**-80 tail event)")
            if self.record_noise_for_testing:
                self.noise_for_testing_ = list(draws)

        with self.timings_.measure(self.party, "mask"):
            b = draw_mask(d, n, frac_bits=f, kappa=p.kappa)
            bound_b = mask_bound(n, frac_bits=f, kappa=p.kappa)
            spans = row_chunk_spans(d, slots)
            # E[N R]
            enc_nr = agg["R"].mul_scalar(n, executor=self.executor)
            # term1: E[v_i]^{pack(b[a:a+len])} -> slots v_i b_j; one shared base per row
            rows: list[list[list[int]]] = [[] for _ in range(d)]
            for i, a, ln in spans:
                rows[i].append(b[a:a + ln])
            term1 = scalars_times_packed(agg["v"], rows, vector_bound=bound_b, executor=self.executor)
            # term2: E[W_a]^{b_i} -> slots b_i v_j, the windows W_a = v[a : a + slots] packed here from
            # the same one-slot E[v_j] as term1 (an owner sends v once, so it cannot send two different v)
            windows = self._windows(agg["v"], d)
            term2 = windows.select([a for _, a, _ in spans]).mul_scalars([b[i] for i, _, _ in spans],
                                                                         executor=self.executor)
            plain = [b[i] * b[j] + g for (i, j), g in zip(_upper_pairs(d), draws)]
            r2 = sum_arrays([enc_nr, term1, term2], executor=self.executor).add_plain(
                plain, plain_bound=bound_b * bound_b + p.noise_allowance)
            # v' travels packed: in its own layout (wide packing: its slots are ~kappa bits wider
            # than M's), repacked from the one-slot E[v_i]; plain packing: the windows starting at
            # 0, slots, 2*slots, ... tile v.
            v_packed = (agg["v"].repack(p.v2_layout, executor=self.executor) if p.packing == "wide"
                        else windows.select(list(range(0, d, slots))))
            v2 = v_packed.add_plain(b, plain_bound=bound_b)

        with self.timings_.measure(self.party, "rerandomize"):
            # The data user holds the secret key, so it can recover each ciphertext's
            # randomness factor rho (c = (1 + m n) rho^n mod n^2). In R'' that factor is
            # rho_R^N * rho_vi^pack(b) * rho_a^b_i, a function of the mask b. Multiplying by
            # r^n with r uniform in Z*_n ("standard" factors) makes rho_out = rho_in * r
            # uniform and independent of rho_in, whatever encryptor the owners used. A DJN
            # factor hs^alpha would not: it stays in the subgroup generated by hs, so
            # rho_out keeps rho_in's coset (e.g. its Jacobi symbol), which for owner
            # ciphertexts made with r^n (phe) depends on the parities of the mask.
            r2, v2 = self._rerandomize(r2, v2)

        meta = {"owners": self.owners_, "d": d, "N": str(n), "frac_bits": f,
                "statements": [st.to_json() for st in self.statements_],
                "noise_lattice": setting.noise_lattice, "privacy": noise.report.to_dict(),
                # public: the user's plausibility checks allow this noise's tail (protocol.plausibility)
                "noise_sigma_int": {"M": float(mech.sigma) * factor}}
        return self._claim(Message(MessageType.MASKED_RESULT, p.session_id, p.key_fingerprint, self.party, meta=meta,
                                   sections={"R2": r2.to_bytes(), "v2": v2.to_bytes()}).to_bytes())

    def finish_add_remove(self, **options: Any) -> bytes:
        """:meth:`finish` of a proxy for the add/remove release (the name earlier versions used)."""
        return self.finish(**options)

    def _finish_add_remove(self, noise: ReleaseNoise) -> bytes:
        """The add/remove release: noise on E[R], E[v], E[N 2^2f] (or the owners' noise already in), no mask."""
        assert self._aggregate is not None
        p, d, agg = self.params, int(self.d or 0), self._aggregate
        v_packed = agg["v"]  # tiles of v (the release's share_chunks)
        extra: dict[str, Any] = {}
        with self.timings_.measure(self.party, "noise"):
            if noise.distributed is None:
                # drawn ahead from the same calibration (the key fixes it), or now
                key = _noise_key(noise.setting, d)
                draws = self._noise_drawn_ahead(key)
                arrays = {"R": agg["R"], "v": v_packed, "N": agg["N"]}
                folded = self._folded_for(key if draws is not None else None,
                                          {k: a.length for k, a in arrays.items()})
                if draws is None:
                    draws = add_remove.proxy_noise(noise.calibration, p)
                if self.record_noise_for_testing:
                    self.noise_blocks_for_testing_ = draws
                if not folded:  # else the noise rides in the release's zeros (BFV: _fold_noise), added below
                    arrays = p.scheme.add_plain_sections(arrays, draws, plain_bound=p.noise_allowance)
                r2, v2, n2 = arrays["R"], arrays["v"], arrays["N"]
                sigmas = {b: math.sqrt(float(s2)) for b, s2 in noise.calibration.sigma_squared_int.items()}
            else:
                self._folded_for(None)  # zeros carrying the proxy's noise drawn ahead are dropped: owners added theirs
                r2, v2, n2 = agg["R"], v_packed, agg["N"]
                extra["coalitions"] = add_remove.coalition_report(noise.distributed, present=len(self.owners_))
                # every present owner's share, if each added its own (the plausibility checks' worst case)
                sigmas = {b: math.sqrt(float(s2) * len(self.owners_))
                          for b, s2 in noise.distributed.local_sigma_squared_int.items()}
        with self.timings_.measure(self.party, "rerandomize"):
            r2, v2, n2 = self._rerandomize(r2, v2, n2)
        meta = {"owners": self.owners_, "d": d, "frac_bits": p.frac_bits, "release": str(self.release),
                "noise_by": noise.setting.noise_by, "statements": [st.to_json() for st in self.statements_],
                "privacy": noise.report.to_dict(), "noise_sigma_int": sigmas, **extra}
        return self._claim(Message(MessageType.MASKED_RESULT, p.session_id, p.key_fingerprint, self.party, meta=meta,
                                   sections=p.scheme.sections_bytes({"R2": r2, "v2": v2, "N2": n2})).to_bytes())


def _noise_key(setting: ReleaseOptions, d: int) -> tuple[Any, ...]:
    """What fixes the add/remove calibration: noise drawn ahead for this key is the noise of this release."""
    return (setting.release, setting.epsilon, setting.delta, setting.calibration, d)


def _upper_pairs(d: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(d) for j in range(i, d)]
