"""The data user: key generation, the checks of the signed counts, one decryption per session, PCA.

Its last step is :meth:`DataUser.finish` (Wang & Chang, eq. 22);
:func:`dpdpca.protocol.roles.user_round` receives the proxy's release over any
transport and calls it.  It answers nothing: no message of the protocol asks
it to decrypt on another party's behalf.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any, Iterator, Sequence

import numpy as np

from dpdpca._validation import check_int
from dpdpca.crypto import EncryptedArray, PrivateKey, scheme_named, upper_triangle_chunks
from dpdpca.crypto.compute import EngineLike
from dpdpca.dp import PrivacyReport
from dpdpca.errors import ImplausibleReleaseError, KeyMismatchError, MessageError, ProtocolError
from dpdpca.linalg import top_eigenpairs, unpack_upper
from dpdpca.protocol import add_remove
from dpdpca.protocol.counts import (NO_NOISE, ShareStatement, check_counts, check_noise_statements,
                                    check_statements)
from dpdpca.protocol.identity import OwnerKeyring
from dpdpca.protocol.layout import tile_chunks, triangle_chunk_count
from dpdpca.protocol.ledger import ReleaseLedger
from dpdpca.protocol.messages import Message, MessageType
from dpdpca.protocol.params import DEFAULT_MAX_FEATURES, ProtocolParams, check_features
from dpdpca.protocol.plausibility import (check_add_remove_release, check_centred_release, parse_noise_sigmas,
                                          slot_range_refusal)
from dpdpca.protocol.proofs import check_range_proof_mode
from dpdpca.protocol.releases import ADD_REMOVE, CENTRED, as_release, served_releases
from dpdpca.protocol.sections import check_section_sizes, int_array, load_array
from dpdpca.result import PCAResult
from dpdpca.timing import Timings

__all__ = ["DataUser"]


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
    require_range_proofs : bool
        Refuse a result whose privacy report does not say that the proxy
        checked every owner's range proof (the proxy's statement: the data
        user never sees a share).
    require_range_proof_mode : {"slack", "exact"} or None
        With ``require_range_proofs``: also refuse a report that does not
        say this mode (``range proofs: on, mode exact``).

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
                 max_features: int = DEFAULT_MAX_FEATURES, require_range_proofs: bool = False,
                 require_range_proof_mode: str | None = None) -> None:
        if private_key.public_key != params.public_key:
            raise KeyMismatchError(f"private key must match the public parameters' key "
                                   f"{params.key_fingerprint}, got {private_key.public_key.fingerprint}")
        self.private_key = private_key
        self.params = params
        self.owner_keys = owner_keys
        self.executor = executor
        self.ledger = ReleaseLedger() if ledger is None else ledger
        self.max_features = check_int("max_features", max_features, minimum=1)
        # The proxy's word (its privacy report) that it checked every owner's range proof: the data user
        # cannot check the proofs itself (it never sees a share), as it cannot check the proxy's computation.
        self.require_range_proofs = bool(require_range_proofs)
        self.require_range_proof_mode = None if require_range_proof_mode is None else \
            check_range_proof_mode(require_range_proof_mode)
        self.party = "user"
        self.timings_ = Timings()

    def __repr__(self) -> str:  # never shows the key
        return f"DataUser(key={self.params.key_fingerprint[:16]}, session={self.params.session_id})"

    @classmethod
    def generate(cls, *, key_bits: int = 2048, insecure_test_key: bool = False, executor: EngineLike = None,
                 owner_keys: OwnerKeyring | None = None, ledger: ReleaseLedger | None = None,
                 scheme: str = "paillier", **param_kwargs: Any) -> "DataUser":
        """Generate the key pair (Sec. IV-C step 1) and the public parameters.

        ``scheme``: ``"paillier"`` (default, the paper's) or ``"bfv"``
        (post-quantum, add/remove release only, ``pip install
        'dpdpca[lattice]'``; ``key_bits`` does not apply: the BFV key is sized
        for the declared bounds at >= 128-bit security).
        """
        cipher = scheme_named(scheme)
        if not cipher.centred_release:
            param_kwargs["release"] = ProtocolParams.check_scheme_release(cipher, param_kwargs.get("release", "any"))
        ProtocolParams.check_declared(**param_kwargs)  # a bound out of range is refused before the (slow) key
        t = Timings()
        with t.measure("user", "keygen"):
            max_abs = ProtocolParams.release_value_bound(**param_kwargs) if not cipher.centred_release else 0
            pk, sk = cipher.generate(key_bits=key_bits, insecure_test_key=insecure_test_key, max_abs=max_abs,
                                     additions=int(param_kwargs.get("max_owners", 1)) + 2,
                                     values=ProtocolParams.share_value_count(**param_kwargs))
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
        return [int(x) for x in self._decrypt(m)]

    def _decrypt_sections(self, arrays: dict[str, Any]) -> dict[str, list[int]]:
        """Every section decrypted (:meth:`~dpdpca.crypto.CipherScheme.decrypt_sections`: a packed share once)."""
        try:
            return self.params.scheme.decrypt_sections(self.private_key, arrays, executor=self.executor)
        except MessageError:  # its reason names what decrypted where: not forwarded (slot_range_refusal)
            raise slot_range_refusal() from None

    def _decrypt(self, enc: EncryptedArray) -> list[int]:
        """Decrypt; a plaintext outside the public range (a slot overflowed) is a refused release."""
        try:
            return self.params.scheme.decrypt(self.private_key, enc, executor=self.executor)
        except MessageError:  # its reason names what decrypted where: not forwarded (slot_range_refusal)
            raise slot_range_refusal() from None

    @contextlib.contextmanager
    def _one_release(self, data: bytes) -> Iterator[None]:
        """Claim the session for ``data``, decrypt and check inside, record the outcome.

        The order (``docs/protocol.md``, "Decrypt, check, claim"): every check
        that needs no secret key ran before this; a different release already
        held by the ledger is refused here, before any decryption; then the
        claim; then the decryption and the plausibility checks.  A refusal
        after decrypting keeps the session claimed (outcome ``refused:
        <check>``): whether a release passes is a function of its plaintext, so
        allowing another release of the session would give a malicious proxy an
        oracle.  The same bytes again are allowed (the same outcome).
        """
        p = self.params
        digest = hashlib.sha256(bytes(data)).hexdigest()
        self.ledger.claim(p.session_id, role="user", digest=digest)
        try:
            yield
        except ImplausibleReleaseError as exc:
            self.ledger.record_outcome(p.session_id, digest=digest, outcome=f"refused: {exc.check}")
            raise
        self.ledger.record_outcome(p.session_id, digest=digest, outcome="released")

    def reconstruct(self, data: bytes, *, n_components: int | None = None
                    ) -> tuple[np.ndarray, int, PrivacyReport, dict[str, Any]]:
        """Check and decrypt ``R''`` and ``v'``; return ``M`` (exact ints), ``scale``, report, meta.

        ``M = R'' - v' v'^T`` in Python integers; ``S_bar + G' = M / scale``.
        Before decrypting: the owners' signed statements must verify under the
        data user's own keyring and add up to the N the proxy claims, the
        ciphertext counts must be those of d, ``n_components`` (if given)
        must be in [1, d], and the ledger must not hold another release of
        this session.

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
        msg, d, keyring = self._result_header(data, n_components=n_components)
        n = msg.meta_decimal("N", minimum=1)
        statements, n_signed = check_counts(msg.meta.get("statements"), keyring, session=p.session_id,
                                            key_fingerprint=p.key_fingerprint, d=d, max_owners=p.max_owners,
                                            max_rows_per_owner=p.max_rows_per_owner)
        if n != n_signed:
            raise ProtocolError(f"result N must be the sum of the owners' signed counts {n_signed}, got {n}")
        check_noise_statements(statements, NO_NOISE)  # the centred release's noise is the proxy's alone
        if n < 2:
            raise MessageError(f"result N must be >= 2, got {n}")
        slots = p.layout.slots
        v_chunks = self._check_owners(msg, statements, d, p.v2_layout.slots)
        check_section_sizes(msg, {"R2": triangle_chunk_count(d, slots), "v2": len(v_chunks)},
                            p.public_key)
        try:
            report = PrivacyReport.from_dict(msg.meta["privacy"])
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"result must carry a privacy report, got {type(exc).__name__}") from None
        sigma = parse_noise_sigmas(msg.meta.get("noise_sigma_int"), ("M",))["M"]
        enc_r2 = load_array(msg, "R2", p.public_key, chunks=list(upper_triangle_chunks(d, slots)),
                             bound=p.layout.limit, layout=p.layout)  # wide packing: R'' carries
        enc_v2 = load_array(msg, "v2", p.public_key, chunks=v_chunks, bound=p.v2_layout.max_abs,
                            layout=p.v2_layout)
        with self._one_release(data):
            with self.timings_.measure(self.party, "decrypt"):
                v2 = [int(x) for x in self._decrypt(enc_v2)]
                if p.packing == "wide":
                    m_flat = self._decrypt_minus_known(enc_r2, enc_v2.bound, v2, d)
                else:
                    r2 = [int(x) for x in self._decrypt(enc_r2)]
            with self.timings_.measure(self.party, "reconstruct"):
                # Python ints in object arrays: exact at any size
                if p.packing == "wide":
                    M = unpack_upper(int_array(m_flat), d)
                else:
                    M = unpack_upper(int_array(r2), d) - np.outer(int_array(v2), int_array(v2))
            with self.timings_.measure(self.party, "check"):
                self.plausibility_ = check_centred_release(M, n, frac_bits=p.frac_bits, sigma_int=sigma,
                                                           n_max=p.n_max)
        self.noisy_scatter_int_ = M
        self.scale_ = n << (2 * p.frac_bits)
        self.n_ = n
        self.masked_sum_ = v2
        return M, self.scale_, report, dict(msg.meta)

    def _result_header(self, data: bytes, *, n_components: int | None = None) -> tuple[Message, int, OwnerKeyring]:
        """The ``MASKED_RESULT`` message and its d, after the checks both releases share.

        ``n_components`` (given) must be in [1, d]: checked here, before the session is claimed.
        """
        p = self.params
        if self.owner_keys is None:
            raise ProtocolError("data user must be given the owners' verify keys (owner_keys) to check N, got none")
        msg = Message.from_bytes(data).expect(MessageType.MASKED_RESULT, session=p.session_id,
                                              key_fingerprint=p.key_fingerprint)
        d = p.check_d(check_features(msg.meta_int("d", minimum=1), self.max_features), who="the proxy's result")
        if n_components is not None:
            check_int("n_components", n_components, minimum=1, maximum=d)
        release = msg.meta.get("release", CENTRED)
        if not any(release == served for served in served_releases(p.release)):
            raise MessageError(f"result release must be {p.release!r}, the one the public parameters were made for, "
                               f"got {str(release)[:40]!r}")
        frac_bits = msg.meta_int("frac_bits", minimum=0)
        if frac_bits != p.frac_bits:
            raise MessageError(f"result frac_bits must be {p.frac_bits}, got {frac_bits}")
        if self.require_range_proofs:
            privacy = msg.meta.get("privacy")
            notes = str(privacy.get("notes", "")) if isinstance(privacy, dict) else ""
            if "range proofs: on" not in notes:
                raise ProtocolError("result privacy report must say the proxy checked the owners' range proofs "
                                    "(require_range_proofs, --range-proofs), got a release without them")
            mode = self.require_range_proof_mode
            if mode is not None and f"range proofs: on, mode {mode}" not in notes:
                raise ProtocolError(f"result privacy report must say the proxy checked the owners' range proofs in "
                                    f"mode {mode!r} (--range-proof-mode), got a release in another mode")
        return msg, d, self.owner_keys

    @staticmethod
    def _check_noise_by(msg: Message, statements: Sequence[ShareStatement]) -> None:
        """The release's ``noise_by`` must be what the owners' signed statements say their shares hold.

        ``"proxy"``: every share holds none.  ``"owners"``: every share holds
        the same owners' noise (never ``"none"``: noiseless shares released
        under an owners'-noise report would be the exact values with a DP label).
        """
        noise_by = msg.meta.get("noise_by", "proxy")
        if noise_by == "proxy":
            check_noise_statements(statements, NO_NOISE)
        elif noise_by == "owners":
            label = statements[0].noise
            if label == NO_NOISE:
                raise ProtocolError(f"share statement of owner {statements[0].owner_id!r} must say its share holds "
                                    f"the owners' noise the release claims (noise_by 'owners'), got 'none'")
            check_noise_statements(statements, label)
        else:
            raise MessageError(f"result noise_by must be 'proxy' or 'owners', got {str(noise_by)[:40]!r}")

    @staticmethod
    def _check_owners(msg: Message, statements: Sequence[ShareStatement], d: int, slots: int) -> list[int]:
        """The result must name the owners of its statements; returns the chunk sizes of the packed v."""
        owners = [st.owner_id for st in statements]
        if msg.meta.get("owners") != owners:
            raise MessageError(f"result owners must be those of the signed statements {owners}, "
                               f"got {str(msg.meta.get('owners'))[:200]}")
        return tile_chunks(d, slots)

    def reconstruct_add_remove(self, data: bytes, *, n_components: int | None = None
                               ) -> tuple[np.ndarray, PrivacyReport, dict[str, Any]]:
        """Check and decrypt the add/remove release; return ``S~ = R~ - v~ v~^T / N~``, report, meta.

        The owners' statements must verify (they carry no counts: N is
        private), ``n_components`` (if given) must be in [1, d], and the ledger
        must not hold another release of this session.
        Sets ``noisy_blocks_`` (the decrypted integers) and ``n_noisy_``.

        Raises
        ------
        MessageError, AuthenticationError, ProtocolError
            As :meth:`reconstruct`.
        """
        p = self.params
        msg, d, keyring = self._result_header(data, n_components=n_components)
        statements = check_statements(msg.meta.get("statements"), keyring, session=p.session_id,
                                      key_fingerprint=p.key_fingerprint, d=d, max_owners=p.max_owners,
                                      counted=False)
        self._check_noise_by(msg, statements)
        slots = p.layout.slots
        self._check_owners(msg, statements, d, slots)
        shapes = ADD_REMOVE.share_chunks(d, slots)  # the aggregate has the shares' layout
        scheme = p.scheme
        if not scheme.packs_sections:  # a packed result (BFV) is size-checked by load_sections
            check_section_sizes(msg, {f"{k}2": c for k, c in ADD_REMOVE.share_counts(d, slots).items()},
                                p.public_key)
        try:
            report = PrivacyReport.from_dict(msg.meta["privacy"])
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"result must carry a privacy report, got {type(exc).__name__}") from None
        sigmas = parse_noise_sigmas(msg.meta.get("noise_sigma_int"), ("R", "v", "N"))
        if scheme.packs_sections:
            arrays = scheme.load_sections({f"{k}2": msg.section(f"{k}2") for k in shapes}, p.public_key,
                                          layout=p.layout, lengths={f"{k}2": sum(c) for k, c in shapes.items()},
                                          bounds={f"{k}2": p.layout.max_abs for k in shapes})
        else:
            arrays = {f"{k}2": load_array(msg, f"{k}2", p.public_key, chunks=chunks, bound=p.layout.max_abs,
                                          layout=p.layout)
                      for k, chunks in shapes.items()}
        with self._one_release(data):
            with self.timings_.measure(self.party, "decrypt"):
                blocks = self._decrypt_sections(arrays)
            with self.timings_.measure(self.party, "check"):
                self.plausibility_ = check_add_remove_release(blocks["R2"], blocks["v2"], blocks["N2"][0], d=d,
                                                              frac_bits=p.frac_bits, sigma_int=sigmas,
                                                              n_max=p.n_max)
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
        # the release object of the message decides (a result without the field predates add/remove)
        release = as_release(Message.from_bytes(data).meta.get("release", CENTRED), name="result release")
        return release.decrypt_result(self, data, n_components=n_components)

    def _finish_centred(self, data: bytes, *, n_components: int) -> PCAResult:
        """:meth:`finish` for the centred release: ``M / scale`` exactly, then ``eigh``."""
        M, scale, report, meta = self.reconstruct(data, n_components=n_components)
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
                                "explained_variance": [float(x) / max(n_rows - 1, 1) for x in eig],
                                # released quantities only: scikit-learn's ratio and singular values
                                "n_released": n_rows,
                                "total_variance": float(np.trace(S)) / max(n_rows - 1, 1)})

    def _finish_add_remove(self, data: bytes, *, n_components: int) -> PCAResult:
        """:meth:`finish` for the add/remove release: ``S~`` by post-processing, then ``eigh``."""
        S, report, meta = self.reconstruct_add_remove(data, n_components=n_components)
        k = check_int("n_components", n_components, minimum=1, maximum=S.shape[0])
        with self.timings_.measure(self.party, "eigh"):
            self.noisy_scatter_ = S
            eig, comps = top_eigenpairs(S, k)
        n_est = self.n_noisy_
        extra: dict[str, Any] = {"n_rows_noisy": n_est, "owners": list(meta.get("owners", [])),
                                 "explained_variance": [float(x) / max(n_est - 1.0, 1.0) for x in eig],
                                 "release": str(ADD_REMOVE), "noise_by": meta.get("noise_by", "proxy"),
                                 # the noisy count and trace, both released: scikit-learn's ratio and singular values
                                 "n_released": n_est, "total_variance": float(np.trace(S)) / max(n_est - 1.0, 1.0)}
        if "coalitions" in meta:
            extra["coalitions"] = meta["coalitions"]
        return PCAResult(method="dpdpca", components=comps, eigenvalues=eig, privacy=report,
                         explained_variance=eig / max(n_est - 1.0, 1.0), timings=self.timings_,
                         params={"n_components": k, "frac_bits": self.params.frac_bits, "release": str(ADD_REMOVE),
                                 "noise_by": meta.get("noise_by", "proxy")},
                         extra=extra)
