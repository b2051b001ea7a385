"""The three parties of Wang & Chang's protocol, one method per round.

* :class:`DataOwner` -- ``share(X)``: clip, quantize, exact share, encrypt
  (eq. 8), and sign the statement binding its row count ``N_l`` to the
  ciphertexts (:mod:`dpdpca.protocol.counts`).
* :class:`Proxy` -- ``receive_share`` (verifies the owner's signature),
  ``close_collection`` (Alg. 1 lines 2-4; N is the sum of the signed counts),
  ``finish`` (lines 6-11: mask, G, DP noise under encryption, rerandomize;
  once per session, :mod:`dpdpca.protocol.ledger`).  Never holds the secret key.
* :class:`DataUser` -- key generation, ``finish``: checks the signed counts,
  exact ``(R'' - v'v'^T) / N`` (eq. 22) and the eigendecomposition; decrypts
  one release per session.

The chunk layout of a share is :mod:`dpdpca.protocol.layout`; the mask b
(bound, total-variation cost, draw) is :mod:`dpdpca.protocol.masking`.

Alg. 1 line 5 (the proxy learning N) needs no round of its own: N is public
under replace-one, so owners send their counts in the clear, signed, and the
data user never decrypts anything for the proxy (version 1 of the protocol
had a count round, which was a decryption oracle).

Each party holds only what its role may hold and talks only in
:class:`~dpdpca.protocol.messages.Message` bytes.  The exact integer form
(``docs/architecture.md``, "The protocol in integers") with the rigorous
(``"n-scaled"``) noise lattice by default:

``R'' = N*R + v b^T + b v^T + b b^T + G''`` and ``v' = v + b``, so the user
computes ``M = R'' - v' v'^T = N*R - v v^T + G'' = N*S_int + G''`` in Python
integers and ``S_bar + G' = M / (N * 2**(2f))`` as the last (correctly rounded)
step.
"""

from __future__ import annotations

import hashlib
from dpdpca.crypto.compute import EngineLike
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_data_matrix, check_int, check_open_unit, check_positive, param_error
from dpdpca.crypto import (EncryptedArray, PrivateKey, PublicKey, decrypt, encrypt, generate_keypair,
                           scalars_times_packed, sum_arrays, upper_triangle_chunks, upper_triangle_flatten)
from dpdpca.data import clip_rows
from dpdpca.dp import (REPLACE_ONE, DiscreteGaussianMechanism, DistributedCalibration, PrivacyReport,
                       calibrate_add_remove, calibrate_distributed)
from dpdpca.dp.release import check_release
from dpdpca.crypto.keys import MIN_SECURE_BITS, derive_hs
from dpdpca.crypto.randomizers import RandomizerPool
from dpdpca.errors import (AuthenticationError, DataError, InsecureKeyError, KeyMismatchError, MessageError,
                           OverflowRiskError, ProtocolError)
from dpdpca.linalg import top_eigenpairs, unpack_upper
from dpdpca.protocol import add_remove
from dpdpca.protocol.counts import SHARE_SECTIONS, ShareStatement, check_counts, check_statements, ciphertext_digest
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
from dpdpca.protocol.layout import (release_ciphertext_count, row_chunk_spans, share_chunks, tile_chunks,
                                    triangle_chunk_count, window_chunks)
from dpdpca.protocol.ledger import ReleaseLedger
from dpdpca.protocol.masking import draw_mask, mask_bound, mask_tv_bound
from dpdpca.protocol.messages import Message, MessageType, check_owner_id
from dpdpca.protocol.params import (DEFAULT_MAX_FEATURES, ProtocolParams, check_features, check_noise_options,
                                    check_release_options, integer_noise_sensitivity)
from dpdpca.protocol.quantize import exact_scatter_share, quantize_rows
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

# The layout and mask helpers live in their own modules; re-exported here for older imports.
__all__ = ["DataOwner", "Proxy", "DataUser", "row_chunk_spans", "window_chunks", "draw_mask", "mask_bound",
           "mask_tv_bound", "triangle_chunk_count"]


class DataOwner:
    """Data owner l: clips, quantizes, encrypts and signs its scatter share.

    Parameters
    ----------
    params : ProtocolParams
        The public parameters (key, layout, declared bounds).
    identity : OwnerIdentity
        The owner's id and Ed25519 signing key; the proxy and the data user
        list its verify key.
    clip : bool
        True: rows are clipped to L2 norm <= 1 with the public rule
        :func:`dpdpca.data.clip_rows`; False: a row of norm > 1 raises.
    executor : Executor, compute engine, distributed.Client or None
        Runs the encryption batches (e.g. :func:`dpdpca.crypto.local_process_pool`).
    insecure_test_key : bool
        The owner's own policy: encrypt under a key below 2048 bits only if
        True.  Never read from the public parameters (the data user writes
        those).
    release : {"centred", "add-remove"}
        ``"add-remove"`` (:mod:`dpdpca.protocol.add_remove`): N is private, so
        it travels encrypted at scale 2^(2f) and the signed statement carries
        no count.
    noise : DistributedCalibration or None
        With ``release="add-remove"``: this owner's share of the distributed
        noise (``--noise-by owners``), added before encrypting.
    record_noise_for_testing : bool
        Keep the drawn noise share in ``noise_blocks_for_testing_`` (tests only).

    Attributes
    ----------
    rows_clipped_ : int
        Rows shrunk by the clipping rule (reported locally, never sent).
    n_rows_ : int
    timings_ : Timings

    Raises
    ------
    InsecureKeyError
        The data user's key is below 2048 bits and ``insecure_test_key`` is False.
    """

    def __init__(self, params: ProtocolParams, identity: OwnerIdentity, *, clip: bool = True,
                 executor: EngineLike = None, insecure_test_key: bool = False, release: str = "centred",
                 noise: DistributedCalibration | None = None, record_noise_for_testing: bool = False) -> None:
        if not isinstance(identity, OwnerIdentity):
            raise ProtocolError(f"identity must be an OwnerIdentity (the owner's signing key), "
                                f"got {type(identity).__name__}")
        bits = int(params.public_key.bits)
        if bits < MIN_SECURE_BITS and not insecure_test_key:
            raise InsecureKeyError(f"data user's key bits must be >= {MIN_SECURE_BITS} for an owner to encrypt "
                                   f"(the owner may pass insecure_test_key=True, CLI --insecure-test-key), got {bits}")
        self.params = params
        # The owner's own DJN base hs = -x^(2n), x drawn here: never the hs in public.json, which
        # the data user chose (hs = 1 would make every ciphertext 1 + m n, readable by anyone).
        self.public_key = PublicKey(int(params.public_key.n), derive_hs(int(params.public_key.n)),
                                    insecure_test_key=True)  # the size policy was checked just above
        self.identity = identity
        self.owner_id = identity.owner_id
        self.clip = bool(clip)
        self.executor = executor
        self.party = f"owner:{self.owner_id}"
        self.timings_ = Timings()
        self.release = check_release(release)
        if noise is not None and self.release != "add-remove":
            raise param_error("noise", "None unless release is 'add-remove'", type(noise).__name__)
        self.noise = noise
        self.record_noise_for_testing = bool(record_noise_for_testing)

    def prepare(self, X: Any) -> np.ndarray:
        """Validate, clip (or check) and quantize: integer rows of shape (n, d).

        Raises
        ------
        DataError
            NaN/inf, empty, not 2-D, or (with ``clip=False``) a row of norm > 1.
        OverflowRiskError
            More rows than the declared ``max_rows_per_owner``.
        """
        name = f"owner {self.owner_id} data"
        arr = check_data_matrix(name, X)
        n_rows = arr.shape[0]
        if n_rows > self.params.max_rows_per_owner:
            raise OverflowRiskError(f"rows per owner must be <= max_rows_per_owner="
                                    f"{self.params.max_rows_per_owner} (declared slot width), "
                                    f"got {n_rows} for owner {self.owner_id}")
        if self.clip:
            arr, self.rows_clipped_ = clip_rows(arr, max_norm=1.0)
        else:
            norms = np.sqrt(np.einsum("ij,ij->i", arr, arr))
            if np.any(norms > 1.0):
                bad = int(np.argmax(norms > 1.0))
                raise DataError(f"rows must have L2 norm <= 1 with clipping off (--no-clip), "
                                f"got norm {float(norms[bad])!r} in row {bad} of owner {self.owner_id}")
            self.rows_clipped_ = 0
        self.n_rows_ = n_rows
        return quantize_rows(arr, self.params.frac_bits)

    def share(self, X: Any) -> bytes:
        """Round 1: the encrypted share ``E[R^l]``, ``E[v^l]`` and the signed count ``N^l`` as one message.

        ``R^l`` is sent as its packed, row-aligned upper triangle.  For the
        centred release ``v^l`` goes twice, as d single-slot ciphertexts and as
        d windows ``W_a = v[a : min(a + slots, d)]`` (the proxy needs both
        shapes for ``v b^T + b v^T``); the add/remove release has no mask, so
        ``v^l`` goes once as ``ceil(d / slots)`` packed tiles, with
        ``E[N^l 2^2f]`` (:func:`dpdpca.protocol.layout.share_chunks`).  Declared bounds are the public ones, never the
        data's.  ``N^l`` travels in the clear inside a
        :class:`~dpdpca.protocol.counts.ShareStatement` signed by the owner,
        which also covers the session, the key, d and the ciphertexts' SHA-256.

        Parameters
        ----------
        X : array-like of shape (n_rows, d)

        Returns
        -------
        bytes
            An ``OWNER_SHARE`` message.

        References
        ----------
        Wang & Chang, Sec. IV-B eq. (8) and IV-C step 2.
        """
        with self.timings_.measure(self.party, "quantize"):
            Xq = self.prepare(X)
            R, v, n = exact_scatter_share(Xq, self.params.frac_bits)
        d = Xq.shape[1]
        p = self.params
        layout = p.layout
        bounds = p.share_bounds(self.release)
        r_upper: Any = upper_triangle_flatten(R)
        v_list = [int(x) for x in v]
        n_sent: int | None = int(n)
        if self.release == "add-remove":
            with self.timings_.measure(self.party, "noise"):
                noise = None if self.noise is None else add_remove.owner_noise(self.noise, p)
                if self.record_noise_for_testing:
                    self.noise_blocks_for_testing_ = noise
                r_upper, v_list, n_scaled = add_remove.add_block_noise(r_upper, v_list, int(n) << (2 * p.frac_bits),
                                                                       noise)
            n_sent = None  # N is private under add/remove-one: no count in the clear
        values = {"R": r_upper, "v": v_list}
        if self.release == "add-remove":
            values["N"] = [n_scaled]
        else:
            values["vwin"] = [x for a in range(d) for x in v_list[a:a + layout.slots]]
        shapes = share_chunks(self.release, d, layout.slots)
        with self.timings_.measure(self.party, "encrypt"):
            if self.executor is None:  # size the one fixed-base table for every ciphertext of the share
                self.public_key.djn_table(sum(len(c) for c in shapes.values()))
            encrypted = {name: encrypt(self.public_key, values[name], layout=layout,
                                       bound=bounds["v" if name == "vwin" else name], chunks=chunks,
                                       executor=self.executor)
                         for name, chunks in shapes.items()}
            self.public_key.drop_table()  # one share per owner and session: free the table now
        with self.timings_.measure(self.party, "serialize"):
            sections = {name: arr.to_bytes() for name, arr in encrypted.items()}
            statement = ShareStatement.sign(self.identity, session=p.session_id, key_fingerprint=p.key_fingerprint,
                                            d=d, n_rows=n_sent,
                                            ciphertext_sha256=ciphertext_digest(sections, _sections(self.release)))
            meta: dict[str, Any] = {"owner_id": self.owner_id, "d": d, "statement": statement.to_json(),
                                    "declared_bounds": {k: str(b) for k, b in bounds.items()}}
            if self.release == "add-remove":
                meta["release"] = self.release
            msg = Message(MessageType.OWNER_SHARE, p.session_id, p.key_fingerprint, self.party, meta=meta,
                          sections=sections)
            data = msg.to_bytes()
        return data


def check_section_sizes(msg: Message, counts: dict[str, int], ciphertext_bytes: int) -> None:
    """Refuse a message whose sections are too short for the ciphertexts its declared d implies.

    Runs before anything is allocated from d, so a small message that declares
    a huge d costs nothing.

    Raises
    ------
    MessageError
        A section shorter than ``count * ciphertext_bytes``.
    """
    for name, count in counts.items():
        have = len(msg.section(name))
        need = count * ciphertext_bytes
        if have < need:
            raise MessageError(f"section {name} must hold {count} ciphertexts ({need} bytes) for the declared d, "
                               f"got {have} bytes")


def _load_array(msg: Message, name: str, public_key: PublicKey, *, chunks: list[int], bound: int,
                layout: Any) -> EncryptedArray:
    """Deserialize a section and check it has the public layout, chunks and bound."""
    arr = EncryptedArray.from_bytes(msg.section(name), public_key)
    if arr.layout != layout:
        raise MessageError(f"section {name} layout must be {layout}, got {arr.layout}")
    if list(arr.chunks) != list(chunks):
        raise MessageError(f"section {name} must have {len(chunks)} ciphertexts in the public chunk layout, "
                           f"got {len(arr.chunks)}")
    if int(arr.bound) > bound:
        raise MessageError(f"section {name} bound must be <= the declared {bound}, got {arr.bound}")
    return arr


def _sections(release: str) -> tuple[str, ...]:
    """The ciphertext sections of a share, in signed-digest order (:func:`share_chunks`)."""
    return ("R", "v", "N") if release == "add-remove" else SHARE_SECTIONS


def _load_share_arrays(msg: Message, params: ProtocolParams, d: int, *, owners: int,
                       release: str = "centred") -> dict[str, EncryptedArray]:
    """The arrays of one share (``owners=1``) or of an aggregate, in :func:`share_chunks` shapes.

    Section sizes are checked against d before any list of length O(d^2) is built.
    """
    slots = params.layout.slots
    sizes = {"R": triangle_chunk_count(d, slots), "v": d if release != "add-remove" else -(-d // slots)}
    sizes.update({"N": 1} if release == "add-remove" else {"vwin": d})
    check_section_sizes(msg, sizes, params.public_key.ciphertext_bytes)
    bounds = {k: b * owners for k, b in params.share_bounds(release).items()}
    return {name: _load_array(msg, name, params.public_key, chunks=chunks,
                              bound=bounds["v" if name == "vwin" else name], layout=params.layout)
            for name, chunks in share_chunks(release, d, slots).items()}


def _ciphertext_fingerprints(arrays: dict[str, EncryptedArray]) -> set[bytes]:
    """16-byte SHA-256 prefixes of every ciphertext (to refuse a ciphertext seen in another share)."""
    out: set[bytes] = set()
    for arr in arrays.values():
        width = arr.public_key.ciphertext_bytes
        out.update(hashlib.sha256(int(c).to_bytes(width, "big")).digest()[:16] for c in arr.ciphertexts)
    return out


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
    release : {"centred", "add-remove"}
        Which release the owners' shares are for (:mod:`dpdpca.protocol.add_remove`).

    Attributes
    ----------
    owners_ : list of str
        Owners in the aggregate, in arrival order (after :meth:`close_collection`).
    n_ : int
        ``N``, the sum of their signed counts.
    statements_ : list of ShareStatement
        Their signed statements, forwarded to the data user.
    """

    def __init__(self, params: ProtocolParams, owner_keys: OwnerKeyring, *, quorum: int | None = None,
                 executor: EngineLike = None, ledger: ReleaseLedger | None = None,
                 max_features: int = DEFAULT_MAX_FEATURES, record_noise_for_testing: bool = False,
                 release: str = "centred") -> None:
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
        self.release = check_release(release)
        self.timings_ = Timings()
        self.party = "proxy"
        self.d: int | None = None
        self._shares: dict[str, dict[str, EncryptedArray]] = {}
        self._statements: dict[str, ShareStatement] = {}
        self._seen: set[bytes] = set()
        self._aggregate: dict[str, EncryptedArray] | None = None
        self.owners_: list[str] = []
        self.statements_: list[ShareStatement] = []
        self.n_: int | None = None
        self._randomizers = RandomizerPool(params.public_key)
        self._prepared = False

    # -- round 1 ------------------------------------------------------------
    def receive_share(self, data: bytes) -> str:
        """Accept one owner's signed share; return its owner id.

        Raises
        ------
        MessageError
            Truncated or tampered bytes, a layout, bound or section size that
            is not the public one for the declared d.
        KeyMismatchError
            A share under another key.
        AuthenticationError
            No valid signature by a listed owner over this session, key,
            owner id, d, count and these ciphertexts.
        ProtocolError
            A duplicate owner id, a ciphertext already received in another
            share (a replay under a new id), another session, or a share
            arriving after the collection closed (late).
        OverflowRiskError
            More owners than ``max_owners`` (the declared slot width).
        DataError
            An owner with a different number of features d, or d above ``max_features``.
        """
        p = self.params
        msg = Message.from_bytes(data).expect(MessageType.OWNER_SHARE, session=p.session_id,
                                              key_fingerprint=p.key_fingerprint)
        owner = check_owner_id(msg.meta.get("owner_id"))
        if msg.sender != f"owner:{owner}":
            raise ProtocolError(f"share sender must be owner:{owner}, got {msg.sender!r:.80}")
        if self._aggregate is not None:
            raise ProtocolError(f"share of owner {owner} must arrive before the collection closes, got it late")
        if owner in self._shares:
            raise ProtocolError(f"owner id must be unique, got a duplicate or replayed share from owner {owner!r}")
        if owner not in self.owner_keys:
            raise AuthenticationError(f"share signer must be a listed owner, got {owner!r}")
        if len(self._shares) >= p.max_owners:
            raise OverflowRiskError(f"owners must be <= max_owners={p.max_owners} (the declared slot width), "
                                    f"got share number {len(self._shares) + 1}")
        d = check_features(msg.meta_int("d", minimum=1), self.max_features)
        if self.d is not None and d != self.d:
            raise DataError(f"owners must all have d={self.d} features, got d={d} from owner {owner!r}")
        if msg.meta.get("release", "centred") != self.release:
            raise MessageError(f"share release must be {self.release!r}, got {str(msg.meta.get('release'))[:40]!r}")
        declared = {k: str(b) for k, b in p.share_bounds(self.release).items()}
        if msg.meta.get("declared_bounds") != declared:
            raise MessageError(f"share declared_bounds must be the public {declared}, "
                               f"got {str(msg.meta.get('declared_bounds'))[:200]}")
        statement = ShareStatement.from_json(msg.meta.get("statement"))
        if statement.owner_id != owner or statement.d != d:
            raise AuthenticationError(f"share statement must be for owner {owner!r} and d={d}, "
                                      f"got owner {statement.owner_id!r} and d={statement.d}")
        if statement.ciphertext_sha256 != ciphertext_digest(msg.sections, _sections(self.release)):
            raise AuthenticationError(f"share statement of owner {owner!r} must cover these ciphertexts, "
                                      f"got another digest")
        if self.release == "add-remove":
            check_statements([statement.to_json()], self.owner_keys, session=p.session_id,
                             key_fingerprint=p.key_fingerprint, d=d, max_owners=1, counted=False)
        else:
            check_counts([statement.to_json()], self.owner_keys, session=p.session_id,
                         key_fingerprint=p.key_fingerprint, d=d, max_owners=1,
                         max_rows_per_owner=p.max_rows_per_owner)
        share = _load_share_arrays(msg, p, d, owners=1, release=self.release)
        fingerprints = _ciphertext_fingerprints(share)
        if not self._seen.isdisjoint(fingerprints):
            raise ProtocolError(f"ciphertexts must be fresh, got owner {owner!r} resending ciphertexts already "
                                f"received in another share (a replay)")
        self._seen |= fingerprints
        self.d = d
        self._shares[owner] = share
        self._statements[owner] = statement
        self.prepare(d)
        return owner

    def prepare(self, d: int) -> None:
        """Start computing the release's rerandomizers ``r^n`` while the collection is open.

        They depend on the key and d only (:func:`release_ciphertext_count`),
        so a background thread makes them while owners are still encrypting;
        :meth:`finish` then takes them off its critical path.  Called on the
        first accepted share; a launcher that knows d earlier may call it
        sooner.  Idempotent.
        """
        if self._prepared:
            return
        d = check_features(check_int("d", d, minimum=1), self.max_features)
        v_slots = None if self.release == "add-remove" else self.params.v2_layout.slots
        self._randomizers.fill(release_ciphertext_count(self.release, d, self.params.layout.slots, v_slots))
        self._prepared = True

    def _rerandomize(self, *arrays: EncryptedArray) -> list[EncryptedArray]:
        """Multiply every outgoing ciphertext by a fresh ``r^n`` (ready ones from :meth:`prepare` first)."""
        ready = self._randomizers.take_ready(sum(len(a.ciphertexts) for a in arrays))
        self._randomizers.close()
        self.timings_.add(self.party, "precompute", self._randomizers.cpu_s)
        out = []
        for a in arrays:
            mine, ready = ready[:len(a.ciphertexts)], ready[len(a.ciphertexts):]
            out.append(a.rerandomize(method="standard", executor=self.executor, factors=mine))
        return out

    @property
    def received(self) -> list[str]:
        """Owner ids whose shares were accepted, in arrival order."""
        return list(self._shares)

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
        if len(self._shares) < self.quorum:
            raise ProtocolError(f"shares must reach the quorum of {self.quorum}, got {len(self._shares)}")
        n = None
        if self.release != "add-remove":
            n = sum(int(st.n_rows or 0) for st in self._statements.values())
            if n < 2:
                raise DataError(f"rows in total must be >= 2 (the centred scatter of one row is 0), got {n}")
        with self.timings_.measure(self.party, "aggregate"):
            shares = list(self._shares.values())
            self._aggregate = {key: sum_arrays([s[key] for s in shares], executor=self.executor)
                               for key in _sections(self.release)}
            self.owners_ = list(self._shares)
            self.statements_ = [self._statements[o] for o in self.owners_]
            self.n_ = n
            self._shares.clear()  # individual shares are no longer needed
            self._seen.clear()
        return n

    # -- the file CLI keeps the aggregate between two invocations ----------------
    def state_bytes(self) -> bytes:
        """The aggregated ciphertexts and signed counts as a ``PROXY_STATE`` message (file CLI)."""
        if self._aggregate is None:
            raise ProtocolError("state_bytes needs a closed collection, got none")
        p = self.params
        return Message(MessageType.PROXY_STATE, p.session_id, p.key_fingerprint, self.party,
                       meta={"owners": self.owners_, "d": self.d, "release": self.release,
                             "statements": [st.to_json() for st in self.statements_]},
                       sections={k: a.to_bytes() for k, a in self._aggregate.items()}).to_bytes()

    @classmethod
    def from_state(cls, params: ProtocolParams, owner_keys: OwnerKeyring, data: bytes, *,
                   executor: EngineLike = None, ledger: ReleaseLedger | None = None,
                   max_features: int = DEFAULT_MAX_FEATURES) -> "Proxy":
        """Rebuild a proxy whose collection is closed from :meth:`state_bytes`; re-checks every signature."""
        msg = Message.from_bytes(data).expect(MessageType.PROXY_STATE, session=params.session_id,
                                              key_fingerprint=params.key_fingerprint)
        d = check_features(msg.meta_int("d", minimum=1), max_features)
        release = check_release(str(msg.meta.get("release", "centred")))
        n: int | None = None
        if release == "add-remove":
            statements = check_statements(msg.meta.get("statements"), owner_keys, session=params.session_id,
                                          key_fingerprint=params.key_fingerprint, d=d,
                                          max_owners=params.max_owners, counted=False)
        else:
            statements, n = check_counts(msg.meta.get("statements"), owner_keys, session=params.session_id,
                                         key_fingerprint=params.key_fingerprint, d=d, max_owners=params.max_owners,
                                         max_rows_per_owner=params.max_rows_per_owner)
        owners = [st.owner_id for st in statements]
        if msg.meta.get("owners") != owners:
            raise MessageError(f"proxy state owners must be those of its statements {owners}, "
                               f"got {str(msg.meta.get('owners'))[:200]}")
        proxy = cls(params, owner_keys, quorum=1, executor=executor, ledger=ledger, max_features=max_features,
                    release=release)
        proxy._aggregate = _load_share_arrays(msg, params, d, owners=len(owners), release=release)
        proxy.owners_, proxy.d, proxy.statements_, proxy.n_ = owners, d, statements, n
        return proxy

    # -- round 4 ------------------------------------------------------------
    def finish(self, *, epsilon: float, delta: float, calibration: str = "analytic",
               sensitivity_mode: str = "rigorous", noise_lattice: str = "n-scaled", noise_by: str = "proxy",
               honest_owners: int | None = None, owners: int | None = None) -> bytes:
        """Mask, build G and add the DP noise under encryption (Alg. 1 lines 6-11).

        For the add/remove release this is :meth:`finish_add_remove` instead
        (no mask; ``noise_by``, ``honest_owners`` and ``owners`` apply there).

        Parameters
        ----------
        epsilon : float > 0
        delta : float in (0, 1)
            The budget of the discrete Gaussian; the reported delta adds the
            mask's total-variation term :func:`mask_tv_bound`.
        calibration : {"analytic", "classic"}
        sensitivity_mode : {"rigorous", "paper"}
            ``"rigorous"``: Delta from :func:`dpdpca.dp.centred_scatter_sensitivity`
            under replace-one; ``"paper"``: Wang & Chang's Delta = 1.
        noise_lattice : {"n-scaled", "integer"}
            ``"n-scaled"`` (rigorous default): G'' integer discrete Gaussian
            calibrated to ``N * S_int``; the user gets ``S_bar + G''/(N 2^2f)``.
            ``"integer"`` (the paper's form): ``N * G'`` with G'
            calibrated to ``S_int``; then ``M = -v v^T (mod N)``, so the data
            user learns every ``v_i v_j mod N`` and the release is NOT DP.

        Returns
        -------
        bytes
            The ``MASKED_RESULT`` message for the data user.

        Raises
        ------
        ParameterError
            epsilon, delta or an option out of range.
        OverflowRiskError
            The noise for this epsilon/delta exceeds the declared allowance, or a
            drawn sample does (probability < 2**-80).
        ProtocolError
            Called before the collection closed, or a second time for this
            session (the ledger already holds a release; this survives the
            process when the ledger is a file).
        """
        if self.release == "add-remove":
            return self.finish_add_remove(epsilon=epsilon, delta=delta, calibration=calibration, noise_by=noise_by,
                                          honest_owners=honest_owners, owners=owners)
        epsilon, delta = check_noise_options(epsilon=epsilon, delta=delta, calibration=calibration,
                                             sensitivity_mode=sensitivity_mode, noise_lattice=noise_lattice)
        if self._aggregate is None or self.n_ is None:
            raise ProtocolError("finish must follow close_collection, got it first")
        if self.ledger.is_released(self.params.session_id):  # early, before any expensive work
            raise ProtocolError(f"session {self.params.session_id} must be released once, got a second release "
                                f"(the ledger holds one)")
        p, n, d = self.params, self.n_, int(self.d or 0)
        f = p.frac_bits
        agg = self._aggregate
        slots = p.layout.slots

        with self.timings_.measure(self.party, "noise"):
            sens_real, sens_int = integer_noise_sensitivity(n, frac_bits=f, sensitivity_mode=sensitivity_mode,
                                                            noise_lattice=noise_lattice)
            # dimension: the rounding-coupling bound (7-8% less sigma than zCDP) with "analytic"
            mech = DiscreteGaussianMechanism(epsilon=epsilon, delta=delta, sensitivity=sens_int,
                                             calibration=calibration, neighbouring=REPLACE_ONE,
                                             sensitivity_mode=sensitivity_mode, dimension=d * (d + 1) // 2)
            factor = n if noise_lattice == "integer" else 1
            p.check_noise_fits(float(mech.sigma) * factor, epsilon=epsilon)
            noise = [int(g) * factor for g in mech.sample_symmetric_upper(d)]
            if noise and max(abs(g) for g in noise) > p.noise_allowance:
                raise OverflowRiskError(f"noise sample must be <= the allowance {p.noise_allowance}, "
                                        f"got {max(abs(g) for g in noise)} (a 2**-80 tail event)")
            if self.record_noise_for_testing:
                self.noise_for_testing_ = list(noise)

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
            # term2: E[W_a]^{b_i} -> slots b_i v_j
            term2 = agg["vwin"].select([a for _, a, _ in spans]).mul_scalars([b[i] for i, _, _ in spans],
                                                                              executor=self.executor)
            plain = [b[i] * b[j] + g for (i, j), g in zip(_upper_pairs(d), noise)]
            r2 = sum_arrays([enc_nr, term1, term2], executor=self.executor).add_plain(
                plain, plain_bound=bound_b * bound_b + p.noise_allowance)
            # v' travels packed: in its own layout (wide packing: its slots are ~kappa bits wider
            # than M's), repacked from the one-slot E[v_i]; plain packing: the windows starting at
            # 0, slots, 2*slots, ... tile v.
            v_packed = (agg["v"].repack(p.v2_layout, executor=self.executor) if p.packing == "wide"
                        else agg["vwin"].select(list(range(0, d, slots))))
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

        tv = mask_tv_bound(d, n, frac_bits=f, kappa=p.kappa)
        base = mech.privacy(noise_added_by="proxy")
        scale = (n << (2 * f)) if noise_lattice == "n-scaled" else (1 << (2 * f))
        lattice_note = ("noise lattice n-scaled (rigorous): G'' discrete Gaussian on the integer query N*S_int"
                        if noise_lattice == "n-scaled" else
                        "noise lattice integer (the paper's form): N*G' added; the user learns "
                        "v_i*v_j mod N, so this release is NOT differentially private")
        report = PrivacyReport(
            epsilon=epsilon, delta=min(1.0, base.delta + tv), mechanism=base.mechanism, calibration=base.calibration,
            sensitivity=sens_real, neighbouring=REPLACE_ONE, noise_added_by="proxy",
            sigma=float(mech.sigma) / scale, sensitivity_mode=sensitivity_mode,
            notes=(f"{lattice_note}; {base.notes + '; ' if base.notes else ''}integer sensitivity {sens_int} "
                   f"at scale {scale}; delta includes the mask's total-variation term {tv:.3e} "
                   f"(kappa={p.kappa}); N={n} is released exactly "
                   f"(replace-one: N is public)"))
        meta = {"owners": self.owners_, "d": d, "N": str(n), "frac_bits": f,
                "statements": [st.to_json() for st in self.statements_],
                "noise_lattice": noise_lattice, "privacy": report.to_dict()}
        out = Message(MessageType.MASKED_RESULT, p.session_id, p.key_fingerprint, self.party, meta=meta,
                      sections={"R2": r2.to_bytes(), "v2": v2.to_bytes()}).to_bytes()
        # Recorded before the release leaves the proxy: a crash can lose it, never duplicate it.
        self.ledger.claim(p.session_id, role="proxy", digest=hashlib.sha256(out).hexdigest())
        self.privacy_ = report
        return out

    def finish_add_remove(self, *, epsilon: float, delta: float, calibration: str = "analytic",
                          noise_by: str = "proxy", honest_owners: int | None = None,
                          owners: int | None = None) -> bytes:
        """The add/remove release: noise on E[R], E[v], E[N 2^2f] (or the owners' noise already in), no mask.

        Parameters
        ----------
        epsilon : float > 0
        delta : float in (0, 1)
        calibration : {"analytic", "classic"}
            ``"analytic"``: the rounding-coupling bound
            (:func:`dpdpca.dp.calibrate_add_remove`); ``"classic"``: the papers'
            formula.  Owners' noise always uses the distributed accountant.
        noise_by : {"proxy", "owners"}
        honest_owners : int or None
            t (owners' noise; default L).
        owners : int or None
            L (owners' noise; default the number of listed owners).

        Returns
        -------
        bytes
            The ``MASKED_RESULT`` message (``R2``, ``v2``, ``N2`` sections).

        Raises
        ------
        ProtocolError
            Called before the collection closed, or a second time for this session.
        ParameterError, OverflowRiskError
            As :meth:`finish`.
        """
        eps = check_positive("epsilon", epsilon)
        dl = check_open_unit("delta", delta)
        if calibration not in ("analytic", "classic"):
            raise param_error("calibration", "one of ('analytic', 'classic')", calibration)
        n_owners = len(self.owner_keys) if owners is None else check_int("owners", owners, minimum=1)
        check_release_options(release="add-remove", noise_by=noise_by, honest_owners=honest_owners,
                              owners=n_owners, quorum=self.quorum if noise_by == "owners" else None)
        if self._aggregate is None:
            raise ProtocolError("finish must follow close_collection, got it first")
        if self.ledger.is_released(self.params.session_id):
            raise ProtocolError(f"session {self.params.session_id} must be released once, got a second release "
                                f"(the ledger holds one)")
        p, d, agg = self.params, int(self.d or 0), self._aggregate
        v_packed = agg["v"]  # tiles of v (:func:`share_chunks`)
        extra: dict[str, Any] = {}
        with self.timings_.measure(self.party, "noise"):
            if noise_by == "proxy":
                cal = calibrate_add_remove(epsilon=eps, delta=dl, d=d, frac_bits=p.frac_bits,
                                           calibration=calibration)
                noise = add_remove.proxy_noise(cal, p)
                if self.record_noise_for_testing:
                    self.noise_blocks_for_testing_ = noise
                r2 = agg["R"].add_plain(noise["R"], plain_bound=p.noise_allowance)
                v2 = v_packed.add_plain(noise["v"], plain_bound=p.noise_allowance)
                n2 = agg["N"].add_plain(noise["N"], plain_bound=p.noise_allowance)
                report = cal.report("proxy")
            else:
                dist = calibrate_distributed(epsilon=eps, delta=dl, d=d, frac_bits=p.frac_bits, owners=n_owners,
                                             honest=n_owners if honest_owners is None else honest_owners,
                                             quorum=self.quorum)
                r2, v2, n2 = agg["R"], v_packed, agg["N"]
                report = dist.report(present=len(self.owners_))
                extra["coalitions"] = dist.coalition_report(present=len(self.owners_))
        with self.timings_.measure(self.party, "rerandomize"):
            r2, v2, n2 = self._rerandomize(r2, v2, n2)
        meta = {"owners": self.owners_, "d": d, "frac_bits": p.frac_bits, "release": "add-remove",
                "noise_by": noise_by, "statements": [st.to_json() for st in self.statements_],
                "privacy": report.to_dict(), **extra}
        out = Message(MessageType.MASKED_RESULT, p.session_id, p.key_fingerprint, self.party, meta=meta,
                      sections={"R2": r2.to_bytes(), "v2": v2.to_bytes(), "N2": n2.to_bytes()}).to_bytes()
        self.ledger.claim(p.session_id, role="proxy", digest=hashlib.sha256(out).hexdigest())
        self.privacy_ = report
        return out


def _int_array(values: Sequence[int]) -> np.ndarray:
    """A 1-D object array of Python ints (numpy keeps them exact)."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _upper_pairs(d: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(d) for j in range(i, d)]


class DataUser:
    """The data user: holds the secret key, checks the signed counts, reconstructs and runs PCA.

    It answers nothing: no message of the protocol asks it to decrypt on
    another party's behalf, and it decrypts one release per session.

    Parameters
    ----------
    private_key : PrivateKey
    params : ProtocolParams
        Must be under ``private_key.public_key``.
    owner_keys : OwnerKeyring or None
        The owners' verify keys (the data user's own copy); needed by
        :meth:`reconstruct` to check N.  May be set later (``user.owner_keys = ...``).
    executor : Executor, compute engine, distributed.Client or None
        Runs the CRT batch decryption.
    ledger : ReleaseLedger or None
        Records the one release decrypted for this session; default in memory.
    max_features : int
        Largest d accepted in a result (checked before decrypting).

    Attributes (after :meth:`finish`)
    ---------------------------------
    noisy_scatter_int_ : ndarray of object (Python int), shape (d, d)
        ``M = R'' - v' v'^T = N * S_int + G''`` exactly.
    scale_ : int
        ``N * 2**(2f)``: ``S_bar + G' = M / scale_``.
    n_ : int
    masked_sum_ : list of int
        ``v' = v + b``.
    """

    def __init__(self, private_key: PrivateKey, params: ProtocolParams, *, owner_keys: OwnerKeyring | None = None,
                 executor: EngineLike = None, ledger: ReleaseLedger | None = None,
                 max_features: int = DEFAULT_MAX_FEATURES) -> None:
        if private_key.public_key != params.public_key:
            raise KeyMismatchError(f"private key must match the public parameters' key "
                                   f"{params.key_fingerprint}, got {private_key.public_key.fingerprint}")
        self.private_key = private_key
        self.params = params
        self.owner_keys = owner_keys
        self.executor = executor
        self.ledger = ReleaseLedger() if ledger is None else ledger
        self.max_features = check_int("max_features", max_features, minimum=1)
        self.party = "user"
        self.timings_ = Timings()

    def __repr__(self) -> str:  # never shows the key
        return f"DataUser(key={self.params.key_fingerprint[:16]}, session={self.params.session_id})"

    @classmethod
    def generate(cls, *, key_bits: int = 2048, insecure_test_key: bool = False, executor: EngineLike = None,
                 owner_keys: OwnerKeyring | None = None, ledger: ReleaseLedger | None = None,
                 **param_kwargs: Any) -> "DataUser":
        """Generate the key pair (Sec. IV-C step 1) and the public parameters."""
        t = Timings()
        with t.measure("user", "keygen"):
            pk, sk = generate_keypair(key_bits, insecure_test_key=insecure_test_key)
            params = ProtocolParams.create(pk, **param_kwargs)
        user = cls(sk, params, owner_keys=owner_keys, executor=executor, ledger=ledger)
        user.timings_.merge(t)
        return user

    def _decrypt_minus_known(self, r2: EncryptedArray, v2_bound: int, v2: list[int], d: int) -> list[int]:
        """Wide packing: ``E[R''] * (1 + n)**(-P(v' v'^T))`` decrypted, i.e. the upper triangle of M.

        The slots of R'' overflow the wide layout's ``max_abs`` (they hold
        ``b_i b_j``); ``M = R'' - v' v'^T = N*S_int + G''`` fits it
        (:func:`~dpdpca.protocol.params.final_value_bound`).  The user already
        holds v' (it is masked and part of the protocol's output), and the
        subtraction is a local operation on ciphertexts it received, so this
        reveals nothing the plain path does not.  The crypto layer refuses the
        subtraction if ``bound(R'') + bound(v')**2`` could wrap mod n.
        """
        vv = [v2[i] * v2[j] for i in range(d) for j in range(i, d)]
        m = r2.sub_plain(vv, plain_bound=v2_bound * v2_bound, result_bound=self.params.final_bound)
        return [int(x) for x in decrypt(self.private_key, m, executor=self.executor)]

    def reconstruct(self, data: bytes) -> tuple[np.ndarray, int, PrivacyReport, dict[str, Any]]:
        """Check and decrypt ``R''`` and ``v'``; return ``M`` (exact ints), ``scale``, report, meta.

        ``M = R'' - v' v'^T`` in Python integers; ``S_bar + G' = M / scale``.
        Before decrypting: the owners' signed statements must verify under the
        data user's own keyring and add up to the N the proxy claims, the
        ciphertext counts must be those of d, and the ledger must not hold
        another release of this session.

        Raises
        ------
        MessageError
            Malformed, or sizes that do not match d.
        AuthenticationError
            A count not signed by a listed owner for this session and key.
        ProtocolError
            N is not the sum of the signed counts, no keyring was given, or
            another release of this session was already decrypted.
        """
        p = self.params
        msg, d, keyring = self._result_header(data)
        n = msg.meta_int("N", minimum=1)
        statements, n_signed = check_counts(msg.meta.get("statements"), keyring, session=p.session_id,
                                            key_fingerprint=p.key_fingerprint, d=d, max_owners=p.max_owners,
                                            max_rows_per_owner=p.max_rows_per_owner)
        if n != n_signed:
            raise ProtocolError(f"result N must be the sum of the owners' signed counts {n_signed}, got {n}")
        if n < 2:
            raise MessageError(f"result N must be >= 2, got {n}")
        slots = p.layout.slots
        v_chunks = self._check_owners(msg, statements, d, p.v2_layout.slots)
        check_section_sizes(msg, {"R2": triangle_chunk_count(d, slots), "v2": len(v_chunks)},
                            p.public_key.ciphertext_bytes)
        try:
            report = PrivacyReport.from_dict(msg.meta["privacy"])
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"result must carry a privacy report, got {type(exc).__name__}") from None
        enc_r2 = _load_array(msg, "R2", p.public_key, chunks=list(upper_triangle_chunks(d, slots)),
                             bound=p.layout.limit, layout=p.layout)  # wide packing: R'' carries
        enc_v2 = _load_array(msg, "v2", p.public_key, chunks=v_chunks, bound=p.v2_layout.max_abs,
                             layout=p.v2_layout)
        # One release per session: recorded before anything is decrypted.
        self.ledger.claim(p.session_id, role="user", digest=hashlib.sha256(bytes(data)).hexdigest())
        with self.timings_.measure(self.party, "decrypt"):
            v2 = [int(x) for x in decrypt(self.private_key, enc_v2, executor=self.executor)]
            if p.packing == "wide":
                m_flat = self._decrypt_minus_known(enc_r2, enc_v2.bound, v2, d)
            else:
                r2 = [int(x) for x in decrypt(self.private_key, enc_r2, executor=self.executor)]
        with self.timings_.measure(self.party, "reconstruct"):
            # Python ints in object arrays: exact at any size
            if p.packing == "wide":
                M = unpack_upper(_int_array(m_flat), d)
            else:
                M = unpack_upper(_int_array(r2), d) - np.outer(_int_array(v2), _int_array(v2))
        self.noisy_scatter_int_ = M
        self.scale_ = n << (2 * p.frac_bits)
        self.n_ = n
        self.masked_sum_ = v2
        return M, self.scale_, report, dict(msg.meta)

    def _result_header(self, data: bytes) -> tuple[Message, int, OwnerKeyring]:
        """The ``MASKED_RESULT`` message and its d, after the checks both releases share."""
        p = self.params
        if self.owner_keys is None:
            raise ProtocolError("data user must be given the owners' verify keys (owner_keys) to check N, got none")
        msg = Message.from_bytes(data).expect(MessageType.MASKED_RESULT, session=p.session_id,
                                              key_fingerprint=p.key_fingerprint)
        d = check_features(msg.meta_int("d", minimum=1), self.max_features)
        if msg.meta.get("frac_bits") != p.frac_bits:
            raise MessageError(f"result frac_bits must be {p.frac_bits}, got {str(msg.meta.get('frac_bits'))[:40]}")
        return msg, d, self.owner_keys

    @staticmethod
    def _check_owners(msg: Message, statements: Sequence[ShareStatement], d: int, slots: int) -> list[int]:
        """The result must name the owners of its statements; returns the chunk sizes of the packed v."""
        owners = [st.owner_id for st in statements]
        if msg.meta.get("owners") != owners:
            raise MessageError(f"result owners must be those of the signed statements {owners}, "
                               f"got {str(msg.meta.get('owners'))[:200]}")
        return tile_chunks(d, slots)

    def reconstruct_add_remove(self, data: bytes) -> tuple[np.ndarray, PrivacyReport, dict[str, Any]]:
        """Check and decrypt the add/remove release; return ``S~ = R~ - v~ v~^T / N~``, report, meta.

        The owners' statements must verify (they carry no counts: N is
        private) and the ledger must not hold another release of this session.
        Sets ``noisy_blocks_`` (the decrypted integers) and ``n_noisy_``.

        Raises
        ------
        MessageError, AuthenticationError, ProtocolError
            As :meth:`reconstruct`.
        """
        p = self.params
        msg, d, keyring = self._result_header(data)
        statements = check_statements(msg.meta.get("statements"), keyring, session=p.session_id,
                                      key_fingerprint=p.key_fingerprint, d=d, max_owners=p.max_owners,
                                      counted=False)
        slots = p.layout.slots
        v_chunks = self._check_owners(msg, statements, d, slots)
        check_section_sizes(msg, {"R2": triangle_chunk_count(d, slots), "v2": len(v_chunks), "N2": 1},
                            p.public_key.ciphertext_bytes)
        try:
            report = PrivacyReport.from_dict(msg.meta["privacy"])
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"result must carry a privacy report, got {type(exc).__name__}") from None
        arrays = {"R2": _load_array(msg, "R2", p.public_key, chunks=list(upper_triangle_chunks(d, slots)),
                                    bound=p.layout.max_abs, layout=p.layout),
                  "v2": _load_array(msg, "v2", p.public_key, chunks=v_chunks, bound=p.layout.max_abs,
                                    layout=p.layout),
                  "N2": _load_array(msg, "N2", p.public_key, chunks=[1], bound=p.layout.max_abs, layout=p.layout)}
        self.ledger.claim(p.session_id, role="user", digest=hashlib.sha256(bytes(data)).hexdigest())
        with self.timings_.measure(self.party, "decrypt"):
            blocks = {k: [int(x) for x in decrypt(self.private_key, a, executor=self.executor)]
                      for k, a in arrays.items()}
        with self.timings_.measure(self.party, "reconstruct"):
            S, n_noisy = add_remove.centred_from_noisy(blocks["R2"], blocks["v2"], blocks["N2"][0], d=d,
                                                       frac_bits=p.frac_bits)
        self.noisy_blocks_ = {"R": blocks["R2"], "v": blocks["v2"], "N": blocks["N2"]}
        self.n_noisy_ = n_noisy
        return S, report, dict(msg.meta)

    def finish(self, data: bytes, *, n_components: int) -> PCAResult:
        """Round 4: ``S_bar + G'`` exactly, then ``eigh``; a :class:`PCAResult`.

        Parameters
        ----------
        data : bytes
            The proxy's ``MASKED_RESULT``.
        n_components : int in [1, d]

        Returns
        -------
        PCAResult
            ``components`` (d, k) by decreasing eigenvalue, ``eigenvalues`` of
            ``S_bar + G'`` (scatter units), ``extra["explained_variance"]``
            (eigenvalues / (N - 1)), the proxy's privacy report and the user's
            timings (the runner merges the other parties' and the bytes sent).

        References
        ----------
        Wang & Chang, eq. (22); ``docs/architecture.md``, "The protocol in integers".
        """
        if Message.from_bytes(data).meta.get("release") == "add-remove":
            return self._finish_add_remove(data, n_components=n_components)
        M, scale, report, meta = self.reconstruct(data)
        d = M.shape[0]
        k = check_int("n_components", n_components, minimum=1, maximum=d)
        with self.timings_.measure(self.party, "eigh"):
            # int / int is correctly rounded: the only floating-point step.
            S = np.array([[x / scale for x in row] for row in M], dtype=np.float64)
            self.noisy_scatter_ = S
            # descending, with the project's one sign rule (dpdpca.linalg.flip_signs)
            eig, comps = top_eigenpairs(S, k)
        n_rows = int(meta["N"])
        return PCAResult(method="dpdpca", components=comps, eigenvalues=eig, privacy=report,
                         explained_variance=eig / max(n_rows - 1, 1),
                         timings=self.timings_, params={"n_components": k, "frac_bits": self.params.frac_bits,
                                                        "kappa": self.params.kappa,
                                                        "noise_lattice": meta.get("noise_lattice")},
                         extra={"n_rows": n_rows, "owners": list(meta.get("owners", [])),
                                "explained_variance": [float(x) / max(n_rows - 1, 1) for x in eig]})

    def _finish_add_remove(self, data: bytes, *, n_components: int) -> PCAResult:
        """:meth:`finish` for the add/remove release: ``S~`` by post-processing, then ``eigh``."""
        S, report, meta = self.reconstruct_add_remove(data)
        k = check_int("n_components", n_components, minimum=1, maximum=S.shape[0])
        with self.timings_.measure(self.party, "eigh"):
            self.noisy_scatter_ = S
            eig, comps = top_eigenpairs(S, k)
        n_est = self.n_noisy_
        extra: dict[str, Any] = {"n_rows_noisy": n_est, "owners": list(meta.get("owners", [])),
                                 "explained_variance": [float(x) / max(n_est - 1.0, 1.0) for x in eig],
                                 "release": "add-remove", "noise_by": meta.get("noise_by", "proxy")}
        if "coalitions" in meta:
            extra["coalitions"] = meta["coalitions"]
        return PCAResult(method="dpdpca", components=comps, eigenvalues=eig, privacy=report,
                         explained_variance=eig / max(n_est - 1.0, 1.0), timings=self.timings_,
                         params={"n_components": k, "frac_bits": self.params.frac_bits, "release": "add-remove",
                                 "noise_by": meta.get("noise_by", "proxy")},
                         extra=extra)
