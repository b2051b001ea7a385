"""The encryption schemes behind one interface: packed Paillier (default) and BFV (optional, post-quantum).

The protocol never branches on a scheme's name: it asks its public key's
:class:`CipherScheme` (:func:`scheme_of`) to encrypt, load, sum, rerandomize
and decrypt arrays of signed integers with declared bounds.  Paillier is the
default and the paper-faithful scheme (Wang & Chang use Paillier); BFV
(:mod:`dpdpca.crypto.lattice`) serves the add/remove release, whose proxy only
adds, and is chosen by the data user at keygen (``--scheme bfv``).

Examples
--------
>>> scheme_named("paillier").name
'paillier'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from dpdpca._validation import check_int, param_error
from dpdpca.crypto import wire
from dpdpca.crypto.ciphertexts import divide_out, from_fixed_bytes, product_mod, to_fixed_bytes
from dpdpca.crypto.encrypted import EncryptedArray, as_int_list, decrypt, decrypt_many, encrypt, sum_arrays
from dpdpca.crypto.keys import MIN_SECURE_BITS, PrivateKey, PublicKey, generate_keypair
from dpdpca.crypto.packing import SlotLayout
from dpdpca.errors import InsecureKeyError, MessageError, OverflowRiskError

__all__ = ["CipherScheme", "PaillierScheme", "BFVScheme", "SCHEMES", "scheme_named", "scheme_of",
           "public_key_from_json", "private_key_from_json"]

#: Scheme names the data user may choose at keygen.
SCHEMES = ("paillier", "bfv")


class CipherScheme:
    """What the protocol needs of a scheme: arrays of signed integers with public bounds, summed and noised.

    Attributes
    ----------
    name : str
    centred_release : bool
        Whether the scheme serves the centred (masked) release, which needs
        an encrypted value raised to plaintext vectors (Paillier only).
    """

    name = ""
    centred_release = False
    #: Whether shares may be checked and summed in worker processes (:func:`~dpdpca.protocol.intake.intake_kernel`):
    #: the scheme implements :meth:`intake_sum`, :meth:`intake_bytes`, :meth:`intake_from_bytes` and :meth:`take_out`.
    pooled_intake = False
    #: Whether the pooled intake runs in threads of the proxy's process rather than in its pool's processes (BFV: a
    #: share is ~394 kB, and copying it to a process and serializing a chunk's sum back cost more CPU than the
    #: check, whose SHA-256 passes and numpy checks and sums release the GIL).
    intake_in_threads = False
    #: Whether the release's noise, drawn ahead, can be folded into its zeros made ahead
    #: (:meth:`fold_plain_sections`), so the release adds one ciphertext (BFV).
    folds_plain = False
    #: Whether the proxy adds each accepted share (or pool chunk's sum) into one running sum as it arrives (BFV: a
    #: ciphertext addition per ciphertext, and a sum the scheme refuses, a transparent one, then refuses the share
    #: that made it), rather than keeping them to sum once the collection closes (Paillier: one batch of products
    #: on the proxy's engine).
    sums_at_intake = False
    #: Whether encryption randomness can be made ahead, offline (Paillier's DJN factors, :class:`RandomizerPool`).
    offline_factors = False
    #: Whether owners can prove their shares' ranges (:mod:`dpdpca.crypto.rangeproof`, packed Paillier).
    range_proofs = False
    #: Whether a share's sections travel as ONE packed array (BFV): its bytes under the first section's name, the
    #: other sections empty; loaded with :meth:`load_sections` instead of :meth:`load` per section.
    packs_sections = False

    def generate(self, *, key_bits: int, insecure_test_key: bool, max_abs: int, additions: int,
                 values: int | None = None) -> tuple[Any, Any]:
        """A fresh key pair able to hold ``|value| <= max_abs`` after ``additions`` encryptions and plain adds.

        ``values``: how many values one share holds, when d is declared (BFV sizes its ring to it).
        """
        raise NotImplementedError

    def layout_for(self, public_key: Any, max_abs: int) -> SlotLayout:
        """The slot layout of values within ``max_abs`` under ``public_key``."""
        raise NotImplementedError

    def describe_key(self, public_key: Any) -> dict[str, Any]:
        """The key's public size figures for a result's parameters (``scheme`` plus the scheme's own)."""
        raise NotImplementedError

    def check_encryptor_policy(self, public_key: Any, insecure_test_key: bool) -> None:
        """An owner's own check before encrypting under the data user's key (InsecureKeyError)."""
        raise NotImplementedError

    def encryptor(self, public_key: Any) -> Any:
        """The key a party other than the key holder encrypts or rerandomizes with."""
        return public_key

    def done_encrypting(self, public_key: Any) -> None:
        """Free what :meth:`encryptor`'s key cached for its encryptions (Paillier's fixed-base table)."""

    def encrypt(self, public_key: Any, values: Sequence[int], *, layout: SlotLayout, bound: int,
                chunks: Sequence[int], executor: Any = None) -> Any:
        raise NotImplementedError

    def encrypt_sections(self, public_key: Any, sections: dict[str, tuple[Sequence[int], int, Sequence[int]]], *,
                         layout: SlotLayout, executor: Any = None,
                         factors: Any = None) -> dict[str, Any]:
        """Encrypt several sections ``name -> (values, bound, chunks)`` (one share).

        ``factors``: randomness made ahead, used once: per section where
        :attr:`offline_factors` (Paillier's DJN factors), or the whole share's
        :meth:`encryption_zeros` (BFV).
        """
        if factors is not None and not self.offline_factors:
            raise param_error("factors", f"None with scheme {self.name!r} (no offline randomness)", "given")
        return {name: self.encrypt(public_key, values, layout=layout, bound=bound, chunks=chunks, executor=executor)
                for name, (values, bound, chunks) in sections.items()}

    def load(self, data: bytes, public_key: Any, *, layout: SlotLayout, check_units: bool = True,
             check_trailer: bool = True) -> Any:
        """Deserialize one array (checks its key and form; MessageError / KeyMismatchError).

        ``check_trailer=False``: ``data`` was already checked against a digest
        that covers it (a parsed message's section), so a checksum of the
        array's own format is not computed again.
        """
        raise NotImplementedError

    # -- whole shares: a dict of sections, in the order the signed digest covers them --------------
    def sections_bytes(self, arrays: dict[str, Any]) -> dict[str, bytes]:
        """The wire bytes of a share's (or a result's) sections, one entry per name."""
        return {name: arr.to_bytes() for name, arr in arrays.items()}

    def load_sections(self, sections: dict[str, bytes], public_key: Any, *, layout: SlotLayout,
                      lengths: dict[str, int], bounds: dict[str, int],
                      encryptions: int | None = None) -> dict[str, Any]:
        """Deserialize a packed share (only where :attr:`packs_sections`): lengths and bounds per section, checked.

        ``encryptions``: the sections are that many fresh encryptions summed (an owner's share: 1), so any
        decryption noise they declare beyond that many fresh encryptions' is refused (None: not checked).
        """
        raise NotImplementedError

    def sum_sections(self, shares: Sequence[dict[str, Any]], *, executor: Any = None) -> dict[str, Any]:
        """Section-wise sum of shares with the same section names, in order.

        Raises MessageError where the scheme refuses a partial sum (BFV: a
        transparent result, :func:`~dpdpca.crypto.lattice.refused_if_transparent`).
        """
        return {key: self.sum([s[key] for s in shares], executor=executor) for key in shares[0]}

    def add_plain_sections(self, arrays: dict[str, Any], values: Mapping[str, Sequence[int]], *,
                           plain_bound: int) -> dict[str, Any]:
        """Each section plus its plaintext vector ``values[name]`` (``|value| <= plain_bound``, checked)."""
        return {name: arr.add_plain(values[name], plain_bound=plain_bound) for name, arr in arrays.items()}

    def encryption_zeros(self, public_key: Any, values: int) -> Any:
        """An owner's encryptions of zero for a share of ``values`` values, made ahead as one object (offline).

        Given to :meth:`encrypt_sections` as ``factors``, used once.  None when
        the scheme makes them otherwise (Paillier: DJN factors,
        :attr:`offline_factors`).
        """
        return None

    def release_zeros(self, public_key: Any, values: int, *, additions: int) -> Any:
        """The release's encryptions of zero made ahead as one object, used once by :meth:`rerandomize_sections`.

        For a release of ``values`` values whose aggregate holds at most
        ``additions`` fresh encryptions and plaintext additions.  None when
        the scheme makes its rerandomizers otherwise (Paillier: the proxy's
        :class:`~dpdpca.crypto.RandomizerPool`).
        """
        return None

    def rerandomize_sections(self, arrays: dict[str, Any], public_key: Any, *,
                             executor: Any = None, ready: Any = None) -> dict[str, Any]:
        """:meth:`rerandomize` of every section (``ready``: :meth:`release_zeros`, where the scheme has them)."""
        if ready is not None:
            raise param_error("ready", f"None with scheme {self.name!r} (no release zeros)", type(ready).__name__)
        return {name: self.rerandomize(arr, public_key, executor=executor) for name, arr in arrays.items()}

    def fold_plain_sections(self, ready: Any, values: Mapping[str, Sequence[int]], lengths: Mapping[str, int], *,
                            plain_bound: int) -> None:
        """Fold a plaintext into :meth:`release_zeros` made ahead (only where :attr:`folds_plain`)."""
        raise NotImplementedError

    def decrypt_sections(self, private_key: Any, arrays: dict[str, Any], *,
                         executor: Any = None) -> dict[str, list[int]]:
        """:meth:`decrypt` of every section."""
        return {name: self.decrypt(private_key, arr, executor=executor) for name, arr in arrays.items()}

    def min_ciphertext_bytes(self, public_key: Any) -> int:
        """Bytes each ciphertext takes at least on the wire (section sizes are checked before loading)."""
        raise NotImplementedError

    def ciphertext_count(self, public_key: Any, chunks: int) -> int:
        """Ciphertexts on the wire for ``chunks`` chunks."""
        return chunks

    def min_sections_bytes(self, public_key: Any, chunks: Mapping[str, Sequence[int]]) -> int:
        """The fewest bytes sections of these chunk sizes take on the wire: their ciphertexts at
        :meth:`min_ciphertext_bytes` each (headers not counted), so a size limit below it admits none.

        >>> from dpdpca.crypto import generate_keypair
        >>> pk, _ = generate_keypair(512, insecure_test_key=True)
        >>> PaillierScheme().min_sections_bytes(pk, {"R": [3, 3, 2], "v": [2]}) == 4 * pk.ciphertext_bytes
        True
        """
        count = sum(self.ciphertext_count(public_key, len(c)) for c in chunks.values())
        return count * self.min_ciphertext_bytes(public_key)

    def ciphertext_keys(self, section: bytes, array: Any, public_key: Any) -> list[bytes]:
        """One key per ciphertext of a checked array: equal keys iff equal ciphertexts (replay check)."""
        raise NotImplementedError

    def ciphertext_key_span(self, section: bytes, array: Any, public_key: Any) -> tuple[int, int, int] | None:
        """Where :meth:`ciphertext_keys` lie in ``section``, when they are its own bytes: one run of keys,
        ``(start, length, width)`` (Paillier's ciphertexts), so a pool worker need only say where they are; None
        when they are not (BFV's, read from the residues: they travel back)."""
        return None

    def check_units(self, arrays: dict[str, Any], public_key: Any) -> None:
        """Scheme-specific validity of every ciphertext (Paillier: units modulo n)."""

    def sum(self, arrays: Sequence[Any], *, executor: Any = None) -> Any:
        raise NotImplementedError

    # -- the proxy's pooled intake: a worker sums a chunk of checked shares, the main process takes refused ones out --
    def intake_sum(self, shares: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Section-wise sum of checked shares, in this process (a pool worker's chunk; no executor)."""
        return self.sum_sections(shares)

    def intake_bytes(self, arrays: dict[str, Any]) -> dict[str, bytes]:
        """A worker's :meth:`intake_sum` as bytes for the process that owns the pool (:meth:`intake_from_bytes`)."""
        raise NotImplementedError

    def intake_from_bytes(self, blobs: dict[str, bytes], public_key: Any, *, layout: SlotLayout,
                          chunks: Mapping[str, Sequence[int]], bounds: Mapping[str, int]) -> dict[str, Any]:
        """Inverse of :meth:`intake_bytes`: the sum of shares of these ``chunks``, each section within ``bounds``.

        ``bounds``: the share bounds times the shares summed.  The bytes come
        from the proxy's own worker, not from the wire.
        """
        raise NotImplementedError

    def take_out(self, total: dict[str, Any], share: dict[str, Any]) -> dict[str, Any]:
        """``total`` minus ``share``, a checked share summed into it (refused after its worker summed it in).

        The result is exactly the sum of the other shares (ciphertexts and
        declared bounds); ``share`` must be one of the summands.
        """
        raise NotImplementedError

    def rerandomize(self, array: Any, public_key: Any, *, executor: Any = None) -> Any:
        """The add/remove release's rerandomization: add a fresh encryption of zero under a base of our own."""
        raise NotImplementedError

    def decrypt(self, private_key: Any, array: Any, *, executor: Any = None) -> list[int]:
        raise NotImplementedError

    def public_key_from_json(self, obj: dict[str, Any], *, insecure_test_key: bool = False) -> Any:
        raise NotImplementedError

    def private_key_from_json(self, obj: dict[str, Any], *, insecure_test_key: bool = False) -> Any:
        raise NotImplementedError


class PaillierScheme(CipherScheme):
    """Packed DJN Paillier (:mod:`dpdpca.crypto.encrypted`): both releases; the default."""

    name = "paillier"
    centred_release = True
    pooled_intake = True
    offline_factors = True
    range_proofs = True

    def generate(self, *, key_bits: int, insecure_test_key: bool, max_abs: int = 0,
                 additions: int = 0, values: int | None = None) -> tuple[PublicKey, PrivateKey]:
        return generate_keypair(key_bits, insecure_test_key=insecure_test_key)

    def layout_for(self, public_key: Any, max_abs: int) -> SlotLayout:
        return SlotLayout.for_bound(public_key, max_abs)

    def describe_key(self, public_key: Any) -> dict[str, Any]:
        return {"scheme": self.name, "key_bits": int(public_key.bits)}

    def check_encryptor_policy(self, public_key: Any, insecure_test_key: bool) -> None:
        bits = int(public_key.bits)
        if bits < MIN_SECURE_BITS and not insecure_test_key:
            raise InsecureKeyError(f"data user's key bits must be >= {MIN_SECURE_BITS} for an owner to encrypt "
                                   f"(the owner may pass insecure_test_key=True, CLI --insecure-test-key), got {bits}")
        public_key.check_modulus(require_proof=not insecure_test_key)

    def encryptor(self, public_key: Any) -> Any:
        # the party's own DJN base hs = -x^(2n): never the hs in public.json, which the key holder chose
        return public_key.with_own_base()

    def done_encrypting(self, public_key: Any) -> None:
        public_key.drop_table()

    def encrypt(self, public_key: Any, values: Sequence[int], *, layout: SlotLayout, bound: int,
                chunks: Sequence[int], executor: Any = None) -> EncryptedArray:
        return encrypt(public_key, values, layout=layout, bound=bound, chunks=chunks, executor=executor)

    def encrypt_sections(self, public_key: Any, sections: dict[str, tuple[Sequence[int], int, Sequence[int]]], *,
                         layout: SlotLayout, executor: Any = None,
                         factors: Any = None) -> dict[str, Any]:
        if factors is None and executor is None:  # size the one fixed-base table for the whole share
            public_key.djn_table(sum(len(chunks) for _, _, chunks in sections.values()))
        out = {name: encrypt(public_key, values, layout=layout, bound=bound, chunks=chunks, executor=executor,
                             factors=None if factors is None else factors[name])
               for name, (values, bound, chunks) in sections.items()}
        public_key.drop_table()  # one share per owner and session: free the table now
        return out

    def load(self, data: bytes, public_key: Any, *, layout: SlotLayout, check_units: bool = True,
             check_trailer: bool = True) -> EncryptedArray:
        return EncryptedArray.from_bytes(data, public_key, check_units=check_units, check_trailer=check_trailer)

    def min_ciphertext_bytes(self, public_key: Any) -> int:
        return int(public_key.ciphertext_bytes)

    def ciphertext_keys(self, section: bytes, array: Any, public_key: Any) -> list[bytes]:
        return wire.ciphertext_bytes(section, len(array.ciphertexts), public_key.ciphertext_bytes)

    def ciphertext_key_span(self, section: bytes, array: Any, public_key: Any) -> tuple[int, int, int]:
        width = public_key.ciphertext_bytes
        return (*wire.ciphertext_span(len(section), len(array.ciphertexts), width), width)

    def check_units(self, arrays: dict[str, Any], public_key: Any) -> None:
        wire.check_units({f"section {name}: message ciphertext": arr.ciphertexts for name, arr in arrays.items()},
                         public_key)

    def sum(self, arrays: Sequence[Any], *, executor: Any = None) -> EncryptedArray:
        return sum_arrays(arrays, executor=executor)

    def intake_sum(self, shares: Sequence[dict[str, Any]]) -> dict[str, EncryptedArray]:
        """One ``a * b % n**2`` per ciphertext and share after the first, nothing else (:func:`product_mod`)."""
        out = {}
        for name, first in shares[0].items():
            arrays = [s[name] for s in shares]
            bound = sum(a.bound for a in arrays)
            first.layout.check_bound(bound, f"intake_sum of {len(arrays)} arrays")
            out[name] = first._derive(bound, product_mod([a.ciphertexts for a in arrays], first.public_key.nsquare))
        return out

    def intake_bytes(self, arrays: dict[str, Any]) -> dict[str, bytes]:
        """The ciphertexts only, fixed width (the chunks and bounds are the caller's to say)."""
        return {name: to_fixed_bytes(a.ciphertexts, a.public_key.ciphertext_bytes) for name, a in arrays.items()}

    def intake_from_bytes(self, blobs: dict[str, bytes], public_key: Any, *, layout: SlotLayout,
                          chunks: Mapping[str, Sequence[int]], bounds: Mapping[str, int]) -> dict[str, Any]:
        width = public_key.ciphertext_bytes
        out = {}
        for name, blob in blobs.items():
            cts = from_fixed_bytes(blob, width)
            if len(cts) != len(chunks[name]):
                raise MessageError(f"intake sum section {name} must hold {len(chunks[name])} ciphertexts, "
                                   f"got {len(cts)}")
            out[name] = EncryptedArray._trusted(public_key, layout, tuple(chunks[name]), int(bounds[name]), cts)
        return out

    def take_out(self, total: dict[str, Any], share: dict[str, Any]) -> dict[str, Any]:
        """Each section times the inverse of the share's ciphertexts modulo n**2 (one inversion each)."""
        out = {}
        for name, arr in total.items():
            part = share[name]
            cts = divide_out(arr.ciphertexts, part.ciphertexts, arr.public_key.nsquare)
            out[name] = arr._derive(arr.bound - part.bound, cts)
        return out

    def rerandomize(self, array: Any, public_key: Any, *, executor: Any = None) -> EncryptedArray:
        return array.rerandomize(method="djn", executor=executor, base=public_key)

    def decrypt(self, private_key: Any, array: Any, *, executor: Any = None) -> list[int]:
        return decrypt(private_key, array, executor=executor)  # Python ints already (numpy's tolist or the loop)

    def decrypt_sections(self, private_key: Any, arrays: dict[str, Any], *,
                         executor: Any = None) -> dict[str, list[int]]:
        """Every section's ciphertexts in one batch (:func:`~dpdpca.crypto.encrypted.decrypt_many`): a pool's
        guided schedule runs over the whole release, with no idle tail per section."""
        names = list(arrays)
        return dict(zip(names, decrypt_many(private_key, [arrays[k] for k in names], executor=executor,
                                            names=[f"section {k}" for k in names])))

    def public_key_from_json(self, obj: dict[str, Any], *, insecure_test_key: bool = False) -> PublicKey:
        return PublicKey.from_json(obj, insecure_test_key=insecure_test_key)

    def private_key_from_json(self, obj: dict[str, Any], *, insecure_test_key: bool = False) -> PrivateKey:
        return PrivateKey.from_json(obj, insecure_test_key=insecure_test_key)


class BFVScheme(CipherScheme):
    """BFV over TenSEAL (:mod:`dpdpca.crypto.lattice`): the add/remove release only; optional extra ``[lattice]``.

    ``key_bits`` and ``insecure_test_key`` do not apply: the ring degree,
    moduli and plaintext primes come from the values' range and the additions
    (:func:`~dpdpca.crypto.lattice.smallest_parameters`), always at >= 128-bit
    security (HE Standard).
    """

    name = "bfv"
    centred_release = False
    packs_sections = True
    pooled_intake = True
    intake_in_threads = True
    folds_plain = True
    sums_at_intake = True

    def generate(self, *, key_bits: int, insecure_test_key: bool, max_abs: int,
                 additions: int, values: int | None = None) -> tuple[Any, Any]:
        from dpdpca.crypto.lattice import generate_bfv_keypair, smallest_parameters
        from dpdpca.crypto.lattice_flood import RESERVE_BITS

        # room in q/(2t) for the proxy's noise flooding (rerandomize)
        return generate_bfv_keypair(smallest_parameters(max_abs, additions=additions, reserve_bits=RESERVE_BITS,
                                                        values=values))

    def layout_for(self, public_key: Any, max_abs: int) -> SlotLayout:
        public_key.check_bound(max_abs, "layout")
        # one "slot" per ring coefficient: a chunk of the layout is one ciphertext (per plaintext prime)
        return SlotLayout(slot_bits=max_abs.bit_length() + 1, slots=public_key.slots)

    def describe_key(self, public_key: Any) -> dict[str, Any]:
        p = public_key.params
        return {"scheme": self.name, "ring_degree": p.ring_degree, "coeff_bits": list(p.coeff_bits),
                "plain_moduli_bits": [t.bit_length() for t in p.plain_moduli]}

    def check_encryptor_policy(self, public_key: Any, insecure_test_key: bool) -> None:
        from dpdpca.crypto.lattice import check_not_transparent
        from dpdpca.crypto.lattice_flood import check_flood_room

        public_key.params.check_security()  # the key was checked when loaded; SEAL refuses weaker ones too
        check_flood_room(public_key.params)  # else the proxy would refuse to release, after every share was sent
        # not made from a publicly known secret key (0, +-x^i): the analogue of Paillier's hs = 1, once per key
        check_not_transparent(public_key)

    def encrypt(self, public_key: Any, values: Sequence[int], *, layout: SlotLayout, bound: int,
                chunks: Sequence[int], executor: Any = None) -> Any:
        from dpdpca.crypto.lattice import encrypt_bfv

        return encrypt_bfv(public_key, values, bound=bound, chunks=chunks, layout=layout)

    def encrypt_sections(self, public_key: Any, sections: dict[str, tuple[Sequence[int], int, Sequence[int]]], *,
                         layout: SlotLayout, executor: Any = None,
                         factors: Any = None) -> dict[str, Any]:
        """The sections packed into one slot stream (``ceil(total / N)`` ciphertexts per plaintext prime).

        Each section keeps its own declared bound (checked value by value
        before encrypting); ``chunks`` (the Paillier tiling) does not apply.
        ``factors``: the share's :meth:`encryption_zeros`, made ahead, used once.
        """
        from dpdpca.crypto.lattice import EncryptionZeros, encrypt_segments, views_of

        if factors is not None and not isinstance(factors, EncryptionZeros):
            raise param_error("factors", f"None or EncryptionZeros with scheme {self.name!r}", type(factors).__name__)
        packed = encrypt_segments(public_key, [(values, bound) for values, bound, _ in sections.values()],
                                  layout=layout, zeros=factors)
        return views_of(packed, list(sections))

    def sections_bytes(self, arrays: dict[str, Any]) -> dict[str, bytes]:
        from dpdpca.crypto.lattice import pack_of

        names = list(arrays)
        return {name: (pack_of(arrays).to_bytes() if i == 0 else b"") for i, name in enumerate(names)}

    def load_sections(self, sections: dict[str, bytes], public_key: Any, *, layout: SlotLayout,
                      lengths: dict[str, int], bounds: dict[str, int],
                      encryptions: int | None = None) -> dict[str, Any]:
        """The packed share: its bytes under the first name, the others empty; the segments checked against
        ``lengths`` and ``bounds`` (each declared bound at most the public one).

        The header's noise is its sender's word, and the proxy sizes its flooding and every later check by it:
        an owner declaring the whole of ``q/(2t)`` would have every honest share after it refused, or the
        release's flooding.  So with ``encryptions`` given (an owner's share: 1) a declared noise above that
        many fresh encryptions' worst case (:attr:`~dpdpca.crypto.lattice.BFVParameters.fresh_noise`) is
        refused.
        """
        from dpdpca.crypto.lattice import BFVArray, packed_chunks, views_of

        if not hasattr(public_key, "params"):
            raise MessageError("BFV batch must be loaded under a BFV key, got a Paillier key")
        names = list(lengths)
        first = names[0]
        for name in names[1:]:
            if sections.get(name):
                raise MessageError(f"section {name} must be empty (BFV packs every section into section {first}), "
                                   f"got {len(sections[name])} bytes")
        total = sum(lengths.values())
        count = self._packed_ciphertexts(public_key, total)
        have, need = len(sections.get(first, b"")), self.min_sections_bytes(public_key, {first: [total]})
        if have < need:  # before parsing anything sized by the declared d
            raise MessageError(f"section {first} must hold {count} ciphertexts ({need} bytes) for the declared d, "
                               f"got {have} bytes")
        try:
            packed = BFVArray.from_bytes(sections[first], public_key, layout=layout)
        except MessageError as exc:
            raise MessageError(f"section {first}: {exc}") from None
        if encryptions is not None and packed.noise > encryptions * public_key.params.fresh_noise:
            raise MessageError(f"section {first} noise must be <= {encryptions * public_key.params.fresh_noise} "
                               f"half-units ({encryptions} fresh encryption(s)), got {packed.noise}")
        want_chunks = packed_chunks(public_key, total)
        if packed.chunks != want_chunks:
            raise MessageError(f"section {first} must have {len(want_chunks)} ciphertexts per plaintext prime in "
                               f"the packed layout, got {len(packed.chunks)}")
        if [k for k, _ in packed.segments] != [lengths[k] for k in names]:
            raise MessageError(f"section {first} segments must have lengths {[lengths[k] for k in names]}, got "
                               f"{[k for k, _ in packed.segments][:8]}")
        for name, (_, b) in zip(names, packed.segments):
            if b > bounds[name]:
                raise MessageError(f"section {name} bound must be <= the declared {bounds[name]}, got {b}")
        return views_of(packed, names)

    def sum_sections(self, shares: Sequence[dict[str, Any]], *, executor: Any = None) -> dict[str, Any]:
        from dpdpca.crypto.lattice import pack_of, sum_bfv, views_of

        return views_of(sum_bfv([pack_of(s) for s in shares]), list(shares[0]))

    def add_plain_sections(self, arrays: dict[str, Any], values: Mapping[str, Sequence[int]], *,
                           plain_bound: int) -> dict[str, Any]:
        from dpdpca.crypto.lattice import pack_of, views_of

        lengths = {name: view.length for name, view in arrays.items()}
        return views_of(pack_of(arrays).add_plain(_flat_values(values, lengths), plain_bound=plain_bound),
                        list(arrays))

    def fold_plain_sections(self, ready: Any, values: Mapping[str, Sequence[int]], lengths: Mapping[str, int], *,
                            plain_bound: int) -> None:
        """Fold the plaintext ``values`` (per section, sections of ``lengths`` in order, as
        :meth:`add_plain_sections` packs them) into ``ready`` (:meth:`release_zeros`), offline:
        :meth:`rerandomize_sections` with it then adds them too
        (:meth:`~dpdpca.crypto.lattice_flood.ReleaseZeros.fold_plain`)."""
        ready.fold_plain(_flat_values(values, lengths), plain_bound=plain_bound)

    def encryption_zeros(self, public_key: Any, values: int) -> Any:
        """:class:`~dpdpca.crypto.lattice.EncryptionZeros` for a share of ``values`` values packed as one stream."""
        from dpdpca.crypto.lattice import EncryptionZeros, packed_chunks

        return EncryptionZeros(public_key, packed_chunks(public_key, check_int("values", values, minimum=1)))

    def release_zeros(self, public_key: Any, values: int, *, additions: int) -> Any:
        """:class:`~dpdpca.crypto.lattice_flood.ReleaseZeros` for the packed release of ``values`` values.

        Sized for an aggregate noise bound of ``additions`` fresh encryptions
        (a plaintext addition adds less); None if the key has no room for that
        flood (the release then makes its zeros when it happens, for its own
        noise bound).
        """
        from dpdpca.crypto.lattice import packed_chunks
        from dpdpca.crypto.lattice_flood import ReleaseZeros

        max_noise = check_int("additions", additions, minimum=1) * public_key.params.fresh_noise
        try:
            return ReleaseZeros(public_key, packed_chunks(public_key, check_int("values", values, minimum=1)),
                                max_noise=max_noise)
        except OverflowRiskError:
            return None

    def rerandomize_sections(self, arrays: dict[str, Any], public_key: Any, *,
                             executor: Any = None, ready: Any = None) -> dict[str, Any]:
        """The packed array rerandomized and flooded once: with ``ready`` (:meth:`release_zeros`) if it fits."""
        from dpdpca.crypto.lattice import pack_of, views_of

        packed = pack_of(arrays)
        if ready is not None and ready.fits(packed):
            return views_of(ready.apply(packed), list(arrays))
        if ready is not None and ready.plain_bound:  # fresh zeros would drop the plaintext folded into these
            raise param_error("ready", f"release zeros that fit the aggregate, as {ready!r} carries the release's "
                              f"noise", repr(packed))
        return views_of(self.rerandomize(packed, public_key, executor=executor), list(arrays))

    def decrypt_sections(self, private_key: Any, arrays: dict[str, Any], *,
                         executor: Any = None) -> dict[str, list[int]]:
        from dpdpca.crypto.lattice import pack_of, split_segments

        packed = pack_of(arrays)
        return dict(zip(arrays, split_segments(packed, self.decrypt(private_key, packed, executor=executor))))

    def load(self, data: bytes, public_key: Any, *, layout: SlotLayout, check_units: bool = True,
             check_trailer: bool = True) -> Any:
        from dpdpca.crypto.lattice import BFVArray

        if not hasattr(public_key, "params"):
            raise MessageError("BFV batch must be loaded under a BFV key, got a Paillier key")
        return BFVArray.from_bytes(data, public_key, layout=layout)

    def min_ciphertext_bytes(self, public_key: Any) -> int:
        # exactly: a ciphertext travels as its residues, 2 N uint64 per data prime (the last prime is the special one)
        return 2 * public_key.params.ring_degree * 8 * (len(public_key.params.coeff_bits) - 1)

    def ciphertext_count(self, public_key: Any, chunks: int) -> int:
        return chunks * len(public_key.params.plain_moduli)

    def min_sections_bytes(self, public_key: Any, chunks: Mapping[str, Sequence[int]]) -> int:
        # every section's values are packed into one slot stream (load_sections)
        total = sum(sum(int(c) for c in sizes) for sizes in chunks.values())
        return self._packed_ciphertexts(public_key, total) * self.min_ciphertext_bytes(public_key)

    def _packed_ciphertexts(self, public_key: Any, total: int) -> int:
        """Ciphertexts of ``total`` values packed as one slot stream (``lattice.packed_chunks``' count, computed
        without building the chunks: checked before anything sized by a declared d is allocated)."""
        return self.ciphertext_count(public_key, -(-total // public_key.params.ring_degree))

    def ciphertext_keys(self, section: bytes, array: Any, public_key: Any) -> list[bytes]:
        # a packed share's ciphertexts are all in its first section; the others are empty views of the same pack
        if not section:
            return []
        return getattr(array, "packed", array).replay_keys()

    def sum(self, arrays: Sequence[Any], *, executor: Any = None) -> Any:
        from dpdpca.crypto.lattice import sum_bfv

        return sum_bfv(arrays)

    def intake_bytes(self, arrays: dict[str, Any]) -> dict[str, bytes]:
        return self.sections_bytes(arrays)

    def intake_from_bytes(self, blobs: dict[str, bytes], public_key: Any, *, layout: SlotLayout,
                          chunks: Mapping[str, Sequence[int]], bounds: Mapping[str, int]) -> dict[str, Any]:
        """The packed sum (its own bounds and noise, checked against the key), each segment within ``bounds``."""
        return self.load_sections(blobs, public_key, layout=layout, bounds=dict(bounds),
                                  lengths={name: sum(c) for name, c in chunks.items()})

    def take_out(self, total: dict[str, Any], share: dict[str, Any]) -> dict[str, Any]:
        """The packed total minus the packed share (:meth:`~dpdpca.crypto.lattice.BFVArray.take_out`)."""
        from dpdpca.crypto.lattice import pack_of, views_of

        return views_of(pack_of(total).take_out(pack_of(share)), list(total))

    def rerandomize(self, array: Any, public_key: Any, *, executor: Any = None) -> Any:
        """A fresh encryption of 0 added, then the noise flooded (:func:`~dpdpca.crypto.lattice_flood.rerandomize_release`)."""
        from dpdpca.crypto.lattice_flood import rerandomize_release

        return rerandomize_release(array)

    def decrypt(self, private_key: Any, array: Any, *, executor: Any = None) -> list[int]:
        from dpdpca.crypto.lattice import decrypt_bfv

        return decrypt_bfv(private_key, array)

    def public_key_from_json(self, obj: dict[str, Any], *, insecure_test_key: bool = False) -> Any:
        from dpdpca.crypto.lattice import BFVPublicKey

        return BFVPublicKey.from_json(obj, insecure_test_key=insecure_test_key)

    def private_key_from_json(self, obj: dict[str, Any], *, insecure_test_key: bool = False) -> Any:
        from dpdpca.crypto.lattice import BFVPrivateKey

        return BFVPrivateKey.from_json(obj, insecure_test_key=insecure_test_key)


def _flat_values(values: Mapping[str, Sequence[int]], lengths: Mapping[str, int]) -> list[int]:
    """``values`` of the sections in ``lengths``' order, concatenated (one packed stream), each of its length."""
    flat: list[int] = []
    for name, length in lengths.items():
        part = as_int_list(f"values[{name!r}]", values[name])
        if len(part) != length:
            raise param_error(f"values[{name!r}]", f"length {length}", len(part))
        flat.extend(part)
    return flat


_SCHEMES: dict[str, CipherScheme] = {"paillier": PaillierScheme(), "bfv": BFVScheme()}


def scheme_named(name: str) -> CipherScheme:
    """The scheme called ``name`` (one of :data:`SCHEMES`), else a one-line ParameterError."""
    if name not in _SCHEMES:
        raise param_error("scheme", f"one of {SCHEMES}", name)
    return _SCHEMES[name]


def scheme_of(key: Any) -> CipherScheme:
    """The scheme of a public or private key (``key.scheme``; Paillier keys have none)."""
    return _SCHEMES[str(getattr(key, "scheme", "paillier"))]


def _kty_scheme(obj: Any) -> CipherScheme:
    from dpdpca.crypto.lattice import KEY_TYPE

    return _SCHEMES["bfv"] if isinstance(obj, dict) and obj.get("kty") == KEY_TYPE else _SCHEMES["paillier"]


def public_key_from_json(obj: dict[str, Any], *, insecure_test_key: bool = False) -> Any:
    """A public key of either scheme, by its ``kty`` (``"DPDPCA-BFV"``, else Paillier's JWK)."""
    return _kty_scheme(obj).public_key_from_json(obj, insecure_test_key=insecure_test_key)


def private_key_from_json(obj: dict[str, Any], *, insecure_test_key: bool = False) -> Any:
    """A private key of either scheme, by its ``kty``."""
    return _kty_scheme(obj).private_key_from_json(obj, insecure_test_key=insecure_test_key)
