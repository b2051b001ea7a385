"""The data owner: clip, quantize, exact scatter share, encrypt, sign (Wang & Chang, Sec. IV-B eq. 8).

Its one step is :meth:`DataOwner.share`; :func:`dpdpca.protocol.roles.owner_round`
sends the result to the proxy over any transport.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpdpca._validation import check_data_matrix, param_error
from dpdpca.crypto import EncryptedArray
from dpdpca.crypto.encrypted import as_int_list
from dpdpca.crypto.compute import EngineLike
from dpdpca.crypto.rangeproof import ProverBase, SectionWitness, encrypt_for_proof
from dpdpca.data import clip_rows
from dpdpca.dp import DistributedCalibration
from dpdpca.errors import DataError, OverflowRiskError, ProtocolError
from dpdpca.protocol import add_remove
from dpdpca.protocol.counts import ShareStatement, ciphertext_digest
from dpdpca.protocol.identity import OwnerIdentity
from dpdpca.protocol.messages import Message, MessageType
from dpdpca.protocol.offline import OwnerRandomness
from dpdpca.protocol.params import ProtocolParams
from dpdpca.protocol.proofs import PROOF_SECTION, PROOF_SIGNATURE, check_range_proof_mode, prove_share, sign_proof
from dpdpca.protocol.quantize import exact_scatter_upper, quantize_rows
from dpdpca.timing import Timings

__all__ = ["DataOwner"]


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
    release : {"add-remove", "centred"} or ProtocolRelease
        ``"add-remove"`` (default, as the CLI's; :mod:`dpdpca.protocol.add_remove`):
        N is private, so it travels encrypted at scale 2^(2f) and the signed
        statement carries no count.  ``"centred"``: Wang & Chang's release
        (:mod:`dpdpca.protocol.releases`).
    noise : DistributedCalibration or None
        With ``release="add-remove"``: this owner's share of the distributed
        noise (``--noise-by owners``), added before encrypting.
    record_noise_for_testing : bool
        Keep the drawn noise share in ``noise_blocks_for_testing_`` (tests only).
    range_proofs : bool
        Attach a zero-knowledge proof that every slot of every ciphertext is
        within the public bounds (:mod:`dpdpca.protocol.proofs`; CLI
        ``--range-proofs``).  The owner then encrypts serially under a base
        whose n-th root it knows.
    range_proof_mode : {"slack", "exact"}
        Which proof (:data:`dpdpca.protocol.proofs.RANGE_PROOF_MODES`; CLI
        ``--range-proof-mode``): the session's, or the proxy refuses the share.

    Attributes
    ----------
    rows_clipped_ : int
        Rows shrunk by the clipping rule (reported locally, never sent).
    n_rows_ : int
    timings_ : Timings

    Raises
    ------
    InsecureKeyError
        The data user's key is below 2048 bits and ``insecure_test_key`` is False;
        or its modulus is prime, a perfect power, has a factor below 2**16, or
        its Paillier–Blum proof (``modulus_proof`` of ``public.json``) fails or
        is missing (:meth:`dpdpca.crypto.PublicKey.check_modulus`).
    """

    def __init__(self, params: ProtocolParams, identity: OwnerIdentity, *, clip: bool = True,
                 executor: EngineLike = None, insecure_test_key: bool = False, release: str = "add-remove",
                 noise: DistributedCalibration | None = None, record_noise_for_testing: bool = False,
                 range_proofs: bool = False, range_proof_mode: str = "slack") -> None:
        if not isinstance(identity, OwnerIdentity):
            raise ProtocolError(f"identity must be an OwnerIdentity (the owner's signing key), "
                                f"got {type(identity).__name__}")
        # Paillier, once per process and key: bits, not prime, no perfect power, no factor below 2^16, and the
        # key holder's Paillier-Blum proof (a key without one passes only on the owner's own insecure_test_key).
        params.scheme.check_encryptor_policy(params.public_key, insecure_test_key)
        if range_proofs and not params.scheme.range_proofs:
            raise param_error("range_proofs", f"False with scheme {params.scheme.name!r} (the range proofs are for "
                              f"packed Paillier shares)", range_proofs)
        self.params = params
        # The owner's own DJN base hs = -x^(2n), x drawn here: never the hs in public.json, which
        # the data user chose (hs = 1 would make every ciphertext 1 + m n, readable by anyone).
        self.public_key = params.scheme.encryptor(params.public_key)  # the size policy was checked just above
        self.identity = identity
        self.owner_id = identity.owner_id
        self.clip = bool(clip)
        self.executor = executor
        self.party = f"owner:{self.owner_id}"
        self.timings_ = Timings()
        self.release = params.check_release(release)
        if noise is not None and not self.release.owner_noise:
            raise param_error("noise", f"None with release {str(self.release)!r} (owners' noise needs release "
                              f"'add-remove')", type(noise).__name__)
        self.noise = noise
        self.record_noise_for_testing = bool(record_noise_for_testing)
        self.range_proofs = bool(range_proofs)
        self.range_proof_mode = check_range_proof_mode(range_proof_mode)
        self._randomness: OwnerRandomness | None = None
        self._zeros: Any = None  # BFV: the next share's encryptions of zero, made ahead in memory (used once)

    def precompute(self, d: int) -> OwnerRandomness | None:
        """Offline: make the DJN factors of this owner's share for ``d`` features (timed as ``precompute``).

        They depend on the key, d and the release only; :meth:`share` then
        uses them (once) and its ``encrypt`` phase is one multiplication per
        ciphertext.  Returns them, e.g. to :meth:`OwnerRandomness.save` for a
        later ``owner share`` (``dpdpca owner prepare``).  A scheme without
        such factors makes its encryptions of zero in memory instead (BFV:
        :class:`~dpdpca.crypto.lattice.EncryptionZeros`, the next share's
        ``encrypt`` is then one plaintext addition per ciphertext) and
        returns None: they are never written to a file.
        """
        scheme = self.params.scheme
        if not scheme.offline_factors:
            values = self.release.share_value_count(d, self.params.layout.slots)
            with self.timings_.measure(self.party, "precompute"):
                self._zeros = scheme.encryption_zeros(self.public_key, values)
            return None
        with self.timings_.measure(self.party, "precompute"):
            self._randomness = OwnerRandomness.make(self.public_key, key_fingerprint=self.params.key_fingerprint,
                                                    release=self.release, d=d, slots=self.params.layout.slots,
                                                    executor=self.executor)
        return self._randomness

    def use_randomness(self, randomness: OwnerRandomness) -> None:
        """Encrypt the next share with factors made ahead (:meth:`OwnerRandomness.consume`).

        Raises
        ------
        ProtocolError
            They were made for another key, release or layout (d is checked by :meth:`share`).
        """
        p = self.params
        if (randomness.key_fingerprint, randomness.release, randomness.slots) != (
                p.key_fingerprint, self.release, p.layout.slots):
            raise ProtocolError(f"randomness must be made for key {p.key_fingerprint[:16]}..., release "
                                f"{self.release!r} and {p.layout.slots} slots, got {randomness!r}")
        self._randomness = randomness

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
        self.params.check_d(arr.shape[1], who=f"owner {self.owner_id}'s data")
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
        centred release ``v^l`` goes once, as d single-slot ciphertexts (the
        proxy packs the windows ``v b^T + b v^T`` needs from them itself, so
        there is no second encoding of v to disagree with the first); the
        add/remove release has no mask, so
        ``v^l`` goes once as ``ceil(d / slots)`` packed tiles, with
        ``E[N^l 2^2f]`` (the release's ``share_chunks``, :mod:`dpdpca.protocol.releases`).  Declared bounds are the public ones, never the
        data's.  ``N^l`` travels in the clear inside a
        :class:`~dpdpca.protocol.counts.ShareStatement` signed by the owner,
        which also covers the session, the key, d and the ciphertexts' SHA-256.
        With range proofs, the owner signs its proof section too
        (:func:`dpdpca.protocol.proofs.sign_proof`, meta ``proof_signature``).

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
            r_upper, v, n = exact_scatter_upper(Xq, self.params.frac_bits)
        d = Xq.shape[1]
        p = self.params
        layout = p.layout
        bounds = p.share_bounds(self.release)
        with self.timings_.measure(self.party, "noise"):
            noise = None if self.noise is None else add_remove.owner_noise(self.noise, p)
            if self.record_noise_for_testing:
                self.noise_blocks_for_testing_ = noise
            values, n_sent = self.release.share_values(r_upper, v, int(n),
                                                       frac_bits=p.frac_bits, slots=layout.slots, noise=noise)
        shapes = self.release.share_chunks(d, layout.slots)
        ready, self._randomness = self._randomness, None  # factors made ahead are used once
        zeros, self._zeros = self._zeros, None
        if ready is not None and not ready.matches(key_fingerprint=p.key_fingerprint, release=self.release, d=d,
                                                   slots=layout.slots):
            raise ProtocolError(f"randomness made ahead must be for d={d}, got {ready!r}")
        if ready is not None and self.range_proofs:
            raise ProtocolError("randomness made ahead must not be used with range proofs (the proof needs every "
                                "ciphertext's exponent), got factors made by precompute")
        with self.timings_.measure(self.party, "encrypt"):
            encrypted, witnesses, base = self._encrypt(shapes, values, bounds,
                                                       ready.sections if ready is not None else zeros)
        with self.timings_.measure(self.party, "serialize"):
            sections = p.scheme.sections_bytes(encrypted)  # BFV: one packed stream under the first name
            digest = ciphertext_digest(sections, self.release.sections)
            statement = ShareStatement.sign(self.identity, session=p.session_id, key_fingerprint=p.key_fingerprint,
                                            d=d, n_rows=n_sent, ciphertext_sha256=digest,
                                            noise=add_remove.owner_noise_label(self.noise))
        if base is not None:
            with self.timings_.measure(self.party, "prove"):
                sections[PROOF_SECTION] = prove_share(base, p, self.release, encrypted, witnesses,
                                                      owner_id=self.owner_id, d=d, digest=digest,
                                                      noise=statement.noise, mode=self.range_proof_mode)
        with self.timings_.measure(self.party, "serialize"):
            meta: dict[str, Any] = {"owner_id": self.owner_id, "d": d, "statement": statement.to_json(),
                                    "declared_bounds": {k: str(b) for k, b in bounds.items()}}
            if PROOF_SECTION in sections:  # the proof section signed too: nobody can swap it in transit
                meta[PROOF_SIGNATURE] = sign_proof(self.identity, p, d=d, digest=digest,
                                                   proof=sections[PROOF_SECTION])
            meta["release"] = str(self.release)
            if p.scheme.name != "paillier":  # Paillier shares keep their historical bytes
                meta["scheme"] = p.scheme.name
            msg = Message(MessageType.OWNER_SHARE, p.session_id, p.key_fingerprint, self.party, meta=meta,
                          sections=sections)
            # the signed digest is the message's sections digest when the sections are the release's alone
            data = msg.to_bytes(sections_sha256=digest if tuple(sections) == tuple(self.release.sections) else None)
        return data

    def _encrypt(self, shapes: dict[str, list[int]], values: dict[str, Any], bounds: dict[str, int],
                 ready: Any = None) -> tuple[dict[str, EncryptedArray], dict[str, SectionWitness], ProverBase | None]:
        """Every section encrypted; with range proofs also each ciphertext's exponent and the prover's base.

        ``ready``: randomness made ahead (:meth:`precompute`), used once.
        """
        layout = self.params.layout
        if not self.range_proofs:
            encrypted = self.params.scheme.encrypt_sections(
                self.public_key, {name: (values[name], bounds[name], chunks)
                                  for name, chunks in shapes.items()}, layout=layout, executor=self.executor,
                factors=ready)
            if isinstance(ready, dict):
                ready.clear()
            return encrypted, {}, None
        # The exponents are the proof's witness: encrypted here (serially) under a base whose n-th root is known.
        base = ProverBase.draw(self.params.public_key)
        encrypted, witnesses = {}, {}
        for name, chunks in shapes.items():
            vals = as_int_list(name, values[name])  # the prover's arithmetic is in Python integers
            encrypted[name], exps = encrypt_for_proof(base, vals, layout=layout, chunks=chunks, bound=bounds[name])
            witnesses[name] = SectionWitness(vals, exps)
        base.public_key.drop_table()
        return encrypted, witnesses, base
