"""The three parties of Wang & Chang's protocol, one method per round.

* :class:`DataOwner` -- ``share(X)``: clip, quantize, exact share, encrypt (eq. 8).
* :class:`Proxy` -- ``receive_share``, ``close_collection`` (Alg. 1 lines 2-4,
  E[N] to the user), ``receive_count`` (line 5), ``finish`` (lines 6-11: mask,
  G, DP noise under encryption).  Never holds the secret key.
* :class:`DataUser` -- key generation, ``reveal_count``, ``finish``: exact
  ``(R'' - v'v'^T) / N`` (eq. 22) and the eigendecomposition.

Each party holds only what its role may hold and talks only in
:class:`~dpdpca.protocol.messages.Message` bytes.  The exact integer form
(ARCHITECTURE.md) with the lead's rigorous noise lattice:

``R'' = N*R + v b^T + b v^T + b b^T + G''`` and ``v' = v + b``, so the user
computes ``M = R'' - v' v'^T = N*R - v v^T + G'' = N*S_int + G''`` in Python
integers and ``S_bar + G' = M / (N * 2**(2f))`` as the last (correctly rounded)
step.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_data_matrix, check_int, param_error
from dpdpca.crypto import (EncryptedArray, PrivateKey, PublicKey, decrypt, encrypt, generate_keypair,
                           scalars_times_packed, sum_arrays, upper_triangle_chunks, upper_triangle_flatten)
from dpdpca.data import clip_rows
from dpdpca.dp import REPLACE_ONE, DiscreteGaussianMechanism, PrivacyReport, resolve_source
from dpdpca.errors import DataError, KeyMismatchError, MessageError, OverflowRiskError, ProtocolError
from dpdpca.linalg import top_eigenpairs
from dpdpca.protocol.messages import Message, MessageType, check_owner_id
from dpdpca.protocol.params import ProtocolParams, check_noise_options, integer_noise_sensitivity
from dpdpca.protocol.quantize import exact_scatter_share, quantize_rows
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["DataOwner", "Proxy", "DataUser", "row_chunk_spans", "draw_mask", "mask_tv_bound"]


def row_chunk_spans(d: int, slots: int) -> list[tuple[int, int, int]]:
    """``(row i, first column a, length)`` of each chunk of :func:`dpdpca.crypto.upper_triangle_chunks`."""
    spans = []
    i = a = 0
    for length in upper_triangle_chunks(d, slots):
        spans.append((i, a, length))
        a += length
        if a == d:  # chunks are row-aligned: the next one starts row i + 1 at its diagonal
            i += 1
            a = i
    return spans


def window_chunks(d: int, slots: int) -> list[int]:
    """Sizes of the v windows ``W_a = v[a : min(a + slots, d)]``, ``a = 0..d-1``."""
    return [min(slots, d - a) for a in range(d)]


def mask_bound(n: int, *, frac_bits: int, kappa: int) -> int:
    """``B = 2**kappa * N * 2**f``: ``|v_i| <= N * 2**f``, so b hides v with kappa bits."""
    return (n << frac_bits) << kappa


def mask_tv_bound(d: int, n: int, *, frac_bits: int, kappa: int) -> float:
    """Total-variation distance of ``v' = v + b`` between neighbouring datasets.

    Replace-one changes v by ``x - x'`` with ``||x - x'||_1 <= sqrt(d) * 2 * 2**f``;
    shifting a uniform distribution on ``2B + 1`` integers by ``s`` moves at most
    ``|s| / (2B + 1)`` of its mass per coordinate.
    """
    b = mask_bound(n, frac_bits=frac_bits, kappa=kappa)
    return 2.0 * math.sqrt(d) * float(1 << frac_bits) / float(2 * b + 1)


def draw_mask(d: int, n: int, *, frac_bits: int, kappa: int, source: Any = None) -> list[int]:
    """The proxy's mask b: d integers uniform in ``[-B, B]`` from OS entropy.

    b is *free*: drawn uniformly over all integers of the range, not as
    ``N * b~`` (which would leave ``v' = v (mod N)`` and leak ``v mod N``;
    ARCHITECTURE.md), so ``v' mod N`` is uniform whatever v is.
    ``source`` is for tests only; production always uses
    ``dpdpca.dp.resolve_source(None)`` (the OS CSPRNG).
    """
    bound = mask_bound(n, frac_bits=frac_bits, kappa=kappa)
    src = resolve_source(None) if source is None else source
    # No rejection of "unlucky" draws: conditioning b on anything (even on not
    # being all multiples of N) would bias v' mod N and leak v mod N.
    return [int(x) for x in src.uniform_ints(-bound, bound, d)]


class DataOwner:
    """Data owner l: clips, quantizes and encrypts its scatter share.

    Parameters
    ----------
    params : ProtocolParams
        The public parameters (key, layout, declared bounds).
    owner_id : str
        1-64 characters ``[A-Za-z0-9_.:-]``.
    clip : bool
        True: rows are clipped to L2 norm <= 1 with the public rule
        :func:`dpdpca.data.clip_rows`; False: a row of norm > 1 raises.
    executor : concurrent.futures.Executor or None
        Runs the encryption batches (e.g. :func:`dpdpca.crypto.local_process_pool`).

    Attributes
    ----------
    rows_clipped_ : int
        Rows shrunk by the clipping rule (reported locally, never sent).
    n_rows_ : int
    timings_ : Timings
    """

    def __init__(self, params: ProtocolParams, owner_id: str, *, clip: bool = True,
                 executor: Executor | None = None) -> None:
        self.params = params
        self.owner_id = check_owner_id(owner_id)
        self.clip = bool(clip)
        self.executor = executor
        self.party = f"owner:{self.owner_id}"
        self.timings_ = Timings()

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
        """Round 1: the encrypted share ``E[R^l]``, ``E[v^l]``, ``E[N^l]`` as one message.

        ``R^l`` is sent as its packed, row-aligned upper triangle; ``v^l`` twice:
        as d single-slot ciphertexts and as d windows
        ``W_a = v[a : min(a + slots, d)]`` (the proxy needs both shapes for
        ``v b^T + b v^T``).  Declared bounds are the public ones, never the data's.

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
        bounds = p.share_bounds()
        v_list = [int(x) for x in v]
        with self.timings_.measure(self.party, "encrypt"):
            enc_r = encrypt(p.public_key, upper_triangle_flatten(R), layout=layout, bound=bounds["R"],
                            chunks=upper_triangle_chunks(d, layout.slots), executor=self.executor)
            enc_v = encrypt(p.public_key, v_list, layout=layout, bound=bounds["v"], chunks=[1] * d,
                            executor=self.executor)
            windows = [x for a in range(d) for x in v_list[a:a + layout.slots]]
            enc_w = encrypt(p.public_key, windows, layout=layout, bound=bounds["v"],
                            chunks=window_chunks(d, layout.slots), executor=self.executor)
            enc_n = encrypt(p.public_key, [n], layout=layout, bound=bounds["N"], chunks=[1])
        with self.timings_.measure(self.party, "serialize"):
            msg = Message(MessageType.OWNER_SHARE, p.session_id, p.key_fingerprint, self.party,
                          meta={"owner_id": self.owner_id, "d": d,
                                "declared_bounds": {k: str(b) for k, b in bounds.items()}},
                          sections={"R": enc_r.to_bytes(), "v": enc_v.to_bytes(), "vwin": enc_w.to_bytes(),
                                    "N": enc_n.to_bytes()})
            data = msg.to_bytes()
        return data


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


def _load_share_arrays(msg: Message, params: ProtocolParams, d: int, *, owners: int) -> dict[str, EncryptedArray]:
    """R, v singles, v windows and N of one share (``owners=1``) or of an aggregate of ``owners`` shares."""
    slots = params.layout.slots
    bounds = {k: b * owners for k, b in params.share_bounds().items()}
    shapes = {"R": (upper_triangle_chunks(d, slots), bounds["R"]), "v": ([1] * d, bounds["v"]),
              "vwin": (window_chunks(d, slots), bounds["v"]), "N": ([1], bounds["N"])}
    return {name: _load_array(msg, name, params.public_key, chunks=list(chunks), bound=bound, layout=params.layout)
            for name, (chunks, bound) in shapes.items()}


class Proxy:
    """The honest-but-curious proxy: aggregates, masks and adds DP noise.

    It is built from the *public* parameters only; it never holds the secret
    key (``tests/protocol`` walks its attributes to check).

    Parameters
    ----------
    params : ProtocolParams
    expected_owners : sequence of str or None
        Owners allowed to send a share; None accepts any id.
    quorum : int or None
        Minimum number of shares to proceed; default all expected owners (or 1
        if ``expected_owners`` is None).
    executor : Executor or None
        Runs the homomorphic batches.
    record_noise_for_testing : bool
        Keep the drawn noise in ``noise_for_testing_`` (the upper triangle of
        G'' as added to R'').  Test and ``--verify`` hook only; a real proxy
        must not disclose it to the data user.
    """

    def __init__(self, params: ProtocolParams, *, expected_owners: Sequence[str] | None = None,
                 quorum: int | None = None, executor: Executor | None = None,
                 record_noise_for_testing: bool = False) -> None:
        self.params = params
        self.expected_owners = None if expected_owners is None else [check_owner_id(o) for o in expected_owners]
        default_quorum = len(self.expected_owners) if self.expected_owners is not None else 1
        self.quorum = default_quorum if quorum is None else check_int("quorum", quorum, minimum=1,
                                                                        maximum=params.max_owners)
        if self.expected_owners is not None and self.quorum > len(self.expected_owners):
            raise param_error("quorum", f"<= the number of expected owners ({len(self.expected_owners)})", quorum)
        self.executor = executor
        self.record_noise_for_testing = bool(record_noise_for_testing)
        self.timings_ = Timings()
        self.party = "proxy"
        self.d: int | None = None
        self._shares: dict[str, dict[str, EncryptedArray]] = {}
        self._aggregate: dict[str, EncryptedArray] | None = None
        self.owners_: list[str] = []
        self.n_: int | None = None
        self._finished = False

    # -- round 1 ------------------------------------------------------------
    def receive_share(self, data: bytes) -> str:
        """Accept one owner's share; return its owner id.

        Raises
        ------
        MessageError
            Truncated or tampered bytes, a layout or bound that is not the public one.
        KeyMismatchError
            A share under another key.
        ProtocolError
            A duplicate or replayed owner id, an unexpected owner, another
            session, or a share arriving after the collection closed (late).
        OverflowRiskError
            More owners than ``max_owners`` (the declared slot width).
        DataError
            An owner with a different number of features d.
        """
        p = self.params
        msg = Message.from_bytes(data).expect(MessageType.OWNER_SHARE, session=p.session_id,
                                              key_fingerprint=p.key_fingerprint)
        owner = check_owner_id(msg.meta.get("owner_id"))
        if msg.sender != f"owner:{owner}":
            raise ProtocolError(f"share sender must be owner:{owner}, got {msg.sender!r}")
        if self._aggregate is not None:
            raise ProtocolError(f"share of owner {owner} must arrive before the collection closes, got it late")
        if owner in self._shares:
            raise ProtocolError(f"owner id must be unique, got a duplicate or replayed share from owner {owner!r}")
        if self.expected_owners is not None and owner not in self.expected_owners:
            raise ProtocolError(f"owner id must be one of the expected owners, got {owner!r}")
        if len(self._shares) >= p.max_owners:
            raise OverflowRiskError(f"owners must be <= max_owners={p.max_owners} (the declared slot width), "
                                    f"got share number {len(self._shares) + 1}")
        d = msg.meta_int("d", minimum=1)
        if self.d is not None and d != self.d:
            raise DataError(f"owners must all have d={self.d} features, got d={d} from owner {owner!r}")
        declared = {k: str(b) for k, b in p.share_bounds().items()}
        if msg.meta.get("declared_bounds") != declared:
            raise MessageError(f"share declared_bounds must be the public {declared}, "
                               f"got {msg.meta.get('declared_bounds')!r}")
        share = _load_share_arrays(msg, p, d, owners=1)
        self.d = d
        self._shares[owner] = share
        return owner

    @property
    def received(self) -> list[str]:
        """Owner ids whose shares were accepted, in arrival order."""
        return list(self._shares)

    def close_collection(self) -> bytes:
        """Aggregate (Alg. 1 lines 2-4) and return the ``COUNT_REQUEST`` carrying E[N].

        Late or missing owners are simply not in the aggregate.

        Raises
        ------
        ProtocolError
            Fewer shares than the quorum, or called twice.
        """
        if self._aggregate is not None:
            raise ProtocolError("close_collection must be called once, got a second call")
        if len(self._shares) < self.quorum:
            raise ProtocolError(f"shares must reach the quorum of {self.quorum}, got {len(self._shares)}")
        with self.timings_.measure(self.party, "aggregate"):
            shares = list(self._shares.values())
            self._aggregate = {key: sum_arrays([s[key] for s in shares], executor=self.executor)
                               for key in ("R", "v", "vwin", "N")}
            self.owners_ = list(self._shares)
            self._shares.clear()  # individual shares are no longer needed
        return self._count_request()

    def _count_request(self) -> bytes:
        assert self._aggregate is not None
        p = self.params
        return Message(MessageType.COUNT_REQUEST, p.session_id, p.key_fingerprint, self.party,
                       meta={"owners": self.owners_, "d": self.d},
                       sections={"N": self._aggregate["N"].to_bytes()}).to_bytes()

    # -- the file CLI keeps the aggregate between two invocations ----------------
    def state_bytes(self) -> bytes:
        """The aggregated ciphertexts as a ``PROXY_STATE`` message (file CLI)."""
        if self._aggregate is None:
            raise ProtocolError("state_bytes needs a closed collection, got none")
        p = self.params
        return Message(MessageType.PROXY_STATE, p.session_id, p.key_fingerprint, self.party,
                       meta={"owners": self.owners_, "d": self.d},
                       sections={k: a.to_bytes() for k, a in self._aggregate.items()}).to_bytes()

    @classmethod
    def from_state(cls, params: ProtocolParams, data: bytes, *, executor: Executor | None = None) -> "Proxy":
        """Rebuild a proxy whose collection is closed from :meth:`state_bytes`."""
        msg = Message.from_bytes(data).expect(MessageType.PROXY_STATE, session=params.session_id,
                                              key_fingerprint=params.key_fingerprint)
        owners = [check_owner_id(o) for o in msg.meta.get("owners", [])]
        if not owners:
            raise MessageError("proxy state must list at least one owner, got none")
        d = msg.meta_int("d", minimum=1)
        proxy = cls(params, executor=executor)
        proxy._aggregate = _load_share_arrays(msg, params, d, owners=len(owners))
        proxy.owners_, proxy.d = owners, d
        return proxy

    # -- round 3 ------------------------------------------------------------
    def receive_count(self, data: bytes) -> int:
        """Read N from the user's ``COUNT_REPLY`` (Alg. 1 line 5)."""
        if self._aggregate is None:
            raise ProtocolError("receive_count must follow close_collection, got it first")
        p = self.params
        msg = Message.from_bytes(data).expect(MessageType.COUNT_REPLY, session=p.session_id,
                                              key_fingerprint=p.key_fingerprint)
        n = msg.meta_int("N", minimum=1)
        if n < len(self.owners_) or n > len(self.owners_) * p.max_rows_per_owner:
            raise MessageError(f"N must be in [{len(self.owners_)}, {len(self.owners_) * p.max_rows_per_owner}] "
                               f"for {len(self.owners_)} owners, got {n}")
        self.n_ = n
        return n

    # -- round 4 ------------------------------------------------------------
    def finish(self, *, epsilon: float, delta: float, calibration: str = "analytic",
               sensitivity_mode: str = "rigorous", noise_lattice: str = "n-scaled") -> bytes:
        """Mask, build G and add the DP noise under encryption (Alg. 1 lines 6-11).

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
            ``"integer"`` (ARCHITECTURE.md / paper form): ``N * G'`` with G'
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
            Called before N is known, or twice.
        """
        epsilon, delta = check_noise_options(epsilon=epsilon, delta=delta, calibration=calibration,
                                             sensitivity_mode=sensitivity_mode, noise_lattice=noise_lattice)
        if self._aggregate is None or self.n_ is None:
            raise ProtocolError("finish must follow receive_count, got it first")
        if self._finished:
            raise ProtocolError("finish must be called once, got a second call")
        p, n, d = self.params, self.n_, int(self.d or 0)
        f = p.frac_bits
        agg = self._aggregate
        slots = p.layout.slots

        with self.timings_.measure(self.party, "noise"):
            sens_real, sens_int = integer_noise_sensitivity(n, frac_bits=f, sensitivity_mode=sensitivity_mode,
                                                            noise_lattice=noise_lattice)
            mech = DiscreteGaussianMechanism(epsilon=epsilon, delta=delta, sensitivity=sens_int,
                                             calibration=calibration, neighbouring=REPLACE_ONE,
                                             sensitivity_mode=sensitivity_mode)
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
            # v' travels packed: the windows starting at 0, slots, 2*slots, ... tile v.
            v2 = agg["vwin"].select(list(range(0, d, slots))).add_plain(b, plain_bound=bound_b)

        with self.timings_.measure(self.party, "rerandomize"):
            # The data user holds the secret key, so it can recover each ciphertext's
            # randomness factor. In R'' that factor is rho_R^N * rho_vi^pack(b) * rho_a^b_i,
            # a function of the mask b; fresh encryptions of 0 make what the user
            # receives independent of everything but the plaintexts.
            r2 = r2.rerandomize(executor=self.executor)
            v2 = v2.rerandomize(executor=self.executor)

        tv = mask_tv_bound(d, n, frac_bits=f, kappa=p.kappa)
        base = mech.privacy(noise_added_by="proxy")
        scale = (n << (2 * f)) if noise_lattice == "n-scaled" else (1 << (2 * f))
        lattice_note = ("noise lattice n-scaled (rigorous): G'' discrete Gaussian on the integer query N*S_int"
                        if noise_lattice == "n-scaled" else
                        "noise lattice integer (paper/ARCHITECTURE form): N*G' added; the user learns "
                        "v_i*v_j mod N, so this release is NOT differentially private")
        report = PrivacyReport(
            epsilon=epsilon, delta=min(1.0, base.delta + tv), mechanism=base.mechanism, calibration=base.calibration,
            sensitivity=sens_real, neighbouring=REPLACE_ONE, noise_added_by="proxy",
            sigma=float(mech.sigma) / scale, sensitivity_mode=sensitivity_mode,
            notes=(f"{lattice_note}; {base.notes + '; ' if base.notes else ''}integer sensitivity {sens_int} "
                   f"at scale {scale}; delta includes the mask's total-variation term {tv:.3e} "
                   f"(kappa={p.kappa}); N={n} is released exactly "
                   f"(replace-one: N is public)"))
        self.privacy_ = report
        self._finished = True
        meta = {"owners": self.owners_, "d": d, "N": str(n), "frac_bits": f,
                "noise_lattice": noise_lattice, "privacy": report.to_dict()}
        return Message(MessageType.MASKED_RESULT, p.session_id, p.key_fingerprint, self.party, meta=meta,
                       sections={"R2": r2.to_bytes(), "v2": v2.to_bytes(), "N": agg["N"].to_bytes()}).to_bytes()


def _upper_pairs(d: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(d) for j in range(i, d)]


class DataUser:
    """The data user: holds the secret key, reveals N, reconstructs and runs PCA.

    Parameters
    ----------
    private_key : PrivateKey
    params : ProtocolParams
        Must be under ``private_key.public_key``.
    executor : Executor or None
        Runs the CRT batch decryption.

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

    def __init__(self, private_key: PrivateKey, params: ProtocolParams, *,
                 executor: Executor | None = None) -> None:
        if private_key.public_key != params.public_key:
            raise KeyMismatchError(f"private key must match the public parameters' key "
                                   f"{params.key_fingerprint}, got {private_key.public_key.fingerprint}")
        self.private_key = private_key
        self.params = params
        self.executor = executor
        self.party = "user"
        self.timings_ = Timings()

    @classmethod
    def generate(cls, *, key_bits: int = 2048, insecure_test_key: bool = False, executor: Executor | None = None,
                 **param_kwargs: Any) -> "DataUser":
        """Generate the key pair (Sec. IV-C step 1) and the public parameters."""
        t = Timings()
        with t.measure("user", "keygen"):
            pk, sk = generate_keypair(key_bits, insecure_test_key=insecure_test_key)
            params = ProtocolParams.create(pk, **param_kwargs)
        user = cls(sk, params, executor=executor)
        user.timings_.merge(t)
        return user

    def _decrypt_one(self, msg: Message, name: str) -> list[int]:
        enc = EncryptedArray.from_bytes(msg.section(name), self.params.public_key)
        return [int(x) for x in decrypt(self.private_key, enc, executor=self.executor)]

    def reveal_count(self, data: bytes) -> bytes:
        """Round 2: decrypt E[N] and return N in a ``COUNT_REPLY``.

        The user reveals only a plausible count: one value in
        ``[owners, owners * max_rows_per_owner]`` for the owners the request
        lists (a defensive check; the paper's proxy is honest-but-curious).
        """
        p = self.params
        msg = Message.from_bytes(data).expect(MessageType.COUNT_REQUEST, session=p.session_id,
                                              key_fingerprint=p.key_fingerprint)
        owners = msg.meta.get("owners")
        if not isinstance(owners, list) or not 1 <= len(owners) <= p.max_owners:
            raise MessageError(f"count request must list 1 to {p.max_owners} owners, got {owners!r}")
        with self.timings_.measure(self.party, "reveal_count"):
            values = self._decrypt_one(msg, "N")
            top = len(owners) * p.max_rows_per_owner
            if len(values) != 1 or not len(owners) <= values[0] <= top:
                raise MessageError(f"count request must hold one count in [{len(owners)}, {top}], "
                                   f"got {len(values)} value(s)")
            n = values[0]
        self.n_ = n
        return Message(MessageType.COUNT_REPLY, p.session_id, p.key_fingerprint, self.party,
                       meta={"N": str(n)}).to_bytes()

    def reconstruct(self, data: bytes) -> tuple[np.ndarray, int, PrivacyReport, dict[str, Any]]:
        """Decrypt ``R''`` and ``v'`` and return ``M`` (exact ints), ``scale``, report, meta.

        ``M = R'' - v' v'^T`` in Python integers; ``S_bar + G' = M / scale``.
        """
        p = self.params
        msg = Message.from_bytes(data).expect(MessageType.MASKED_RESULT, session=p.session_id,
                                              key_fingerprint=p.key_fingerprint)
        d = msg.meta_int("d", minimum=1)
        n = msg.meta_int("N", minimum=1)
        if msg.meta.get("frac_bits") != p.frac_bits:
            raise MessageError(f"result frac_bits must be {p.frac_bits}, got {msg.meta.get('frac_bits')!r}")
        with self.timings_.measure(self.party, "decrypt"):
            n_check = self._decrypt_one(msg, "N")
            if n_check != [n]:
                raise MessageError(f"result N must match the encrypted count {n_check}, got {n}")
            r2 = self._decrypt_one(msg, "R2")
            v2 = self._decrypt_one(msg, "v2")
        if len(r2) != d * (d + 1) // 2 or len(v2) != d:
            raise MessageError(f"result must hold {d * (d + 1) // 2} + {d} values for d={d}, got {len(r2)} + {len(v2)}")
        with self.timings_.measure(self.party, "reconstruct"):
            M = np.empty((d, d), dtype=object)
            k = 0
            for i in range(d):
                vi = v2[i]
                for j in range(i, d):
                    M[i, j] = M[j, i] = r2[k] - vi * v2[j]
                    k += 1
        try:
            report = PrivacyReport.from_dict(msg.meta["privacy"])
        except (KeyError, TypeError) as exc:
            raise MessageError(f"result must carry a privacy report, got {exc!r}") from None
        self.noisy_scatter_int_ = M
        self.scale_ = n << (2 * p.frac_bits)
        self.n_ = n
        self.masked_sum_ = v2
        return M, self.scale_, report, dict(msg.meta)

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
        Wang & Chang, eq. (22); ARCHITECTURE.md, "The crypto protocol in integers".
        """
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
