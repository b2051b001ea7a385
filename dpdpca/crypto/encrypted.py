"""Encrypted packed vectors: encryption, decryption and homomorphic operations.

An :class:`EncryptedArray` is a flat vector of ``length`` signed integers
packed into ciphertexts (``chunks[k]`` slots in ciphertext ``k``).  It
carries a public, declared ``bound`` on every ``|slot|``; each operation
computes the bound of its result first and raises
:class:`~dpdpca.errors.OverflowRiskError` *before* computing if that bound
exceeds the layout's ``limit`` (``max_abs``, or a carrying layout's
``carry_bound``; :mod:`dpdpca.crypto.packing`).  Nothing wraps silently.

Homomorphic identities used (g = n + 1, ``E[a] = (1 + a n) r``):
``E[a] E[b] = E[a + b]``, ``E[a] (1 + b n) = E[a + b]``,
``E[a]**k = E[k a]``; with packing ``P(s) = sum_j s_j B**j`` these act
slot-wise (Wang–Chang eqs. 3, 4, 11-13, 18).

References
----------
S. Wang, J. M. Chang, "Differentially private principal component analysis
over horizontally partitioned data", IEEE DSC 2018, §III-B and §IV.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from dpdpca._validation import check_int, param_error, type_error
from dpdpca.crypto import _gmp as bk
from dpdpca.crypto import compute, wire
from dpdpca.crypto.compute import EngineLike
from dpdpca.crypto.keys import METHODS, PrivateKey, PublicKey
from dpdpca.crypto.packing import SlotLayout, centred, pack_many, unpack_many
from dpdpca.errors import KeyMismatchError, MessageError, OverflowRiskError

__all__ = [
    "EncryptedArray",
    "encrypt",
    "encryptions_of_zero",
    "decrypt",
    "decrypt_many",
    "sum_arrays",
    "scalar_times_packed",
    "scalars_times_packed",
]


def as_int_list(name: str, values: Any) -> list[int]:
    """Signed Python ints from a sequence or integer/object array (floats are refused).

    The types are checked once per distinct type, not once per value: a list
    of ``int`` is copied as it is, a list mixing ``int``, ``mpz`` or numpy
    integers is converted by one ``map(int, ...)``; only a sequence holding
    something else is walked value by value, to name the first bad entry.

    Raises
    ------
    ParameterError
        A non-integer entry (encode reals with ``FixedPointCodec`` first).
    """
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise param_error(name, "a 1-D sequence", f"shape {values.shape}")
        if values.dtype.kind in "iu":
            return values.tolist()  # type: ignore[no-any-return]
        if values.dtype.kind != "O":
            raise param_error(name, "integers (encode reals with FixedPointCodec)", f"dtype {values.dtype}")
        values = values.tolist()
    elif not isinstance(values, list):
        values = list(values)
    types = set(map(type, values))
    if types <= {int}:
        return list(values)
    if all(t is not bool and issubclass(t, (Integral, np.integer)) for t in types):
        return list(map(int, values))
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (Integral, np.integer)):
            raise param_error(f"{name}[{i}]", "an integer (encode reals with FixedPointCodec)", v)
    raise AssertionError("unreachable: a type failed the check but no value did")  # pragma: no cover


def _as_int64(values: list[int]) -> Any:
    """One int64 copy for the bound check and the packing when every value fits (the usual case), else the list."""
    try:
        return np.asarray(values, dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return values


def _check_values_within(name: str, values: Sequence[int], bound: int) -> None:
    if len(values) == 0:
        return
    try:  # one numpy pass when the values fit int64 (the usual case); else the exact loop
        arr = np.asarray(values, dtype=np.int64)
        # compared both ways, not through np.abs (which wraps -2**63 to itself); a bound past int64 holds them all
        if bound >= (1 << 63) or not ((arr > bound) | (arr < -bound)).any():
            return
    except (OverflowError, TypeError, ValueError):
        pass
    for i, v in enumerate(values):
        if abs(int(v)) > bound:  # int(): numpy's abs(-2**63) wraps
            raise OverflowRiskError(f"{name}[{i}] must satisfy |value| <= bound {bound}, got {int(v)}")


def _check_chunks(chunks: Sequence[int], slots: int) -> tuple[int, ...]:
    """``chunks`` as a tuple of ints in ``[1, slots]`` (ParameterError naming the first that is not)."""
    chunk_t = tuple(chunks)
    if all(type(c) is int for c in chunk_t) and (not chunk_t or (min(chunk_t) >= 1 and max(chunk_t) <= slots)):
        return chunk_t  # one pass for the usual case, not a check_int per ciphertext
    return tuple(check_int(f"chunks[{k}]", c, minimum=1, maximum=slots) for k, c in enumerate(chunk_t))


def _default_chunks(length: int, slots: int) -> tuple[int, ...]:
    full, rest = divmod(length, slots)
    return (slots,) * full + ((rest,) if rest else ())


class EncryptedArray:
    """A vector of ``length`` signed integers packed into Paillier ciphertexts.

    Parameters
    ----------
    public_key : PublicKey
    layout : SlotLayout
        Slot width and maximum slots per ciphertext; must fit the key.
    chunks : sequence of int
        ``chunks[k]`` in ``[1, layout.slots]`` slots are used in ciphertext ``k``.
    bound : int
        Declared public bound on every ``|slot|``, ``0 <= bound <= layout.limit``.
    ciphertexts : sequence of int
        One per chunk, each in ``[1, n**2)``.

    Raises
    ------
    ParameterError, OverflowRiskError, MessageError
        Inconsistent chunks, a bound beyond the layout, a ciphertext out of range.

    Notes
    -----
    Normally made by :func:`encrypt`, an operation or :meth:`from_bytes`.
    """

    __slots__ = ("public_key", "layout", "chunks", "bound", "ciphertexts")

    def __init__(self, public_key: PublicKey, layout: SlotLayout, chunks: Sequence[int], bound: int,
                 ciphertexts: Sequence[int]) -> None:
        if not isinstance(public_key, PublicKey):
            raise type_error("public_key", "a PublicKey", type(public_key).__name__)
        if not isinstance(layout, SlotLayout):
            raise type_error("layout", "a SlotLayout", type(layout).__name__)
        layout.check_key(public_key)
        chunks = tuple(int(c) for c in chunks)
        if len(chunks) != len(ciphertexts):
            raise param_error("chunks", f"one entry per ciphertext ({len(ciphertexts)})", len(chunks))
        for k, c in enumerate(chunks):
            if not 1 <= c <= layout.slots:
                raise param_error(f"chunks[{k}]", f"in [1, {layout.slots}]", c)
        bound = check_int("bound", bound, minimum=0)
        layout.check_bound(bound, "EncryptedArray")
        cts = [bk.mpz(c) for c in ciphertexts]
        wire.check_ciphertexts(cts, public_key, "ciphertexts")
        self.public_key = public_key
        self.layout = layout
        self.chunks = chunks
        self.bound = bound
        self.ciphertexts = cts

    @classmethod
    def _trusted(cls, public_key: PublicKey, layout: SlotLayout, chunks: tuple[int, ...], bound: int,
                 ciphertexts: list[bk.mpz]) -> EncryptedArray:
        # Results of our own operations: fields are consistent by construction.
        obj = cls.__new__(cls)
        obj.public_key, obj.layout, obj.chunks = public_key, layout, chunks
        obj.bound, obj.ciphertexts = bound, ciphertexts
        return obj

    def _derive(self, bound: int, ciphertexts: list[bk.mpz], chunks: tuple[int, ...] | None = None
                ) -> EncryptedArray:
        return EncryptedArray._trusted(self.public_key, self.layout,
                                       self.chunks if chunks is None else chunks, bound, ciphertexts)

    # -- basic facts ----------------------------------------------------------------
    @property
    def length(self) -> int:
        """Number of slots (values) held."""
        return sum(self.chunks)

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return (f"EncryptedArray(length={self.length}, ciphertexts={len(self.ciphertexts)}, "
                f"slot_bits={self.layout.slot_bits}, bound={self.bound})")

    def _check_same_key(self, other: EncryptedArray, operation: str) -> None:
        if not isinstance(other, EncryptedArray):
            raise param_error("other", "an EncryptedArray", type(other).__name__)
        if other.public_key != self.public_key:
            raise KeyMismatchError(
                f"{operation}: operands must share the key {self.public_key.fingerprint[:16]}..., "
                f"got {other.public_key.fingerprint[:16]}...")

    def _check_same_shape(self, other: EncryptedArray, operation: str) -> None:
        self._check_same_key(other, operation)
        if other.layout != self.layout:
            raise param_error(f"{operation}: layout", f"equal to {self.layout}", other.layout)
        if other.chunks != self.chunks:
            raise param_error(f"{operation}: chunks", "equal on both operands",
                              f"{len(other.chunks)} chunks differing from {len(self.chunks)}")

    # -- homomorphic operations -------------------------------------------------------
    def add(self, other: EncryptedArray, *, executor: EngineLike = None) -> EncryptedArray:
        """Slot-wise sum ``E[a + b]`` (same key, layout and chunks).

        Raises
        ------
        KeyMismatchError
            ``other`` was encrypted under another key.
        OverflowRiskError
            ``bound_a + bound_b`` exceeds the layout's ``limit``.
        """
        return sum_arrays([self, other], executor=executor)

    __add__ = add

    def add_plain(self, values: Sequence[int], *, plain_bound: int | None = None,
                  executor: EngineLike = None) -> EncryptedArray:
        """``E[a + b]`` for plaintext integers ``b`` of the same length (1 mulmod per ciphertext).

        Parameters
        ----------
        values : sequence of int, length ``self.length``
        plain_bound : int or None
            Declared bound on ``|b|``, which becomes part of the (public) result
            bound.  ``None`` uses ``max|b|``: convenient, but the bound then
            reveals ``max|b|`` to whoever sees the result's header -- pass a
            declared bound whenever the result leaves your hands.

        Raises
        ------
        OverflowRiskError
            Some ``|b| > plain_bound`` or ``bound + plain_bound > layout.limit``.
        """
        vals = as_int_list("values", values)
        return self._plus_packed(vals, plain_bound, None, "add_plain")

    def sub_plain(self, values: Sequence[int], *, plain_bound: int, result_bound: int | None = None,
                  executor: EngineLike = None) -> EncryptedArray:
        """``E[a - b]`` for a known plaintext ``b``: one multiplication by ``(1 + n)**(-P(b))`` per ciphertext.

        With a carrying layout (:class:`~dpdpca.crypto.SlotLayout` ``carry_bound``)
        this brings an intermediate value whose slots overflow back to a small,
        decryptable final value.

        Parameters
        ----------
        values : sequence of int, length ``self.length``
            The known plaintext ``b``.
        plain_bound : int
            Declared bound on ``|b|``.  ``bound + plain_bound`` must be within
            ``layout.limit``, so the packed difference can never wrap mod n
            (checked before computing).
        result_bound : int or None
            Declared public bound on ``|a - b|`` when the caller can prove one
            tighter than ``bound + plain_bound`` (e.g. from an algebraic
            identity between a and b); the crypto layer cannot check that
            proof, but decryption rejects any slot beyond it.  ``None``: the
            triangle bound ``bound + plain_bound``.

        Raises
        ------
        OverflowRiskError
            ``|b| > plain_bound``, ``bound + plain_bound > layout.limit``, or
            ``result_bound`` beyond it.

        Examples
        --------
        >>> from dpdpca.crypto import generate_keypair, encrypt, decrypt, SlotLayout
        >>> pk, sk = generate_keypair(512, insecure_test_key=True)
        >>> wide = SlotLayout.for_final_bound(pk, final_abs=100, carry_abs=2**41)
        >>> a = encrypt(pk, [2**39 + 5, -2**39], layout=wide, bound=2**39 + 5)
        >>> decrypt(sk, a.sub_plain([2**39, -2**39 - 7], plain_bound=2**39 + 7, result_bound=10))
        [5, 7]
        """
        if plain_bound is None:
            raise param_error("plain_bound", "a declared integer bound on |values|", plain_bound)
        vals = [-v for v in as_int_list("values", values)]
        return self._plus_packed(vals, plain_bound, result_bound, "sub_plain")

    def _plus_packed(self, vals: list[int], plain_bound: int | None, result_bound: int | None,
                     operation: str) -> EncryptedArray:
        if len(vals) != self.length:
            raise param_error("values", f"of length {self.length}", len(vals))
        if plain_bound is None:
            plain_bound = max((abs(v) for v in vals), default=0)
        plain_bound = check_int("plain_bound", plain_bound, minimum=0)
        checked = _as_int64(vals)
        _check_values_within("values", checked, plain_bound)
        new_bound = self.bound + plain_bound
        self.layout.check_bound(new_bound, operation)
        if result_bound is not None:
            result_bound = check_int("result_bound", result_bound, minimum=0, maximum=new_bound)
            new_bound = result_bound
        n, n2 = self.public_key.n, self.public_key.nsquare
        sb = self.layout.slot_bits
        packed = [P % n for P in pack_many(checked, self.chunks, sb)]
        # c * (1 + P n) = c + n (P c mod n)  (mod n**2)
        cts = [(c + n * (p * c % n)) % n2 for c, p in zip(self.ciphertexts, packed)]
        return self._derive(new_bound, cts)

    def mul_scalar(self, k: int, *, executor: EngineLike = None) -> EncryptedArray:
        """``E[k a]`` for one plaintext integer ``k`` (negative allowed).

        Raises
        ------
        OverflowRiskError
            ``bound * |k|`` exceeds the layout's ``limit``.
        """
        k = check_int("k", k)
        return self.mul_scalars([k] * len(self.ciphertexts), executor=executor)

    def mul_scalars(self, ks: Sequence[int], *, executor: EngineLike = None) -> EncryptedArray:
        """``E[k_i a_i]``: ciphertext ``i`` (all its slots) times ``ks[i]``.

        Raises
        ------
        OverflowRiskError
            ``bound * max|k|`` exceeds the layout's ``limit``.
        """
        ks = as_int_list("ks", ks)
        if len(ks) != len(self.ciphertexts):
            raise param_error("ks", f"one multiplier per ciphertext ({len(self.ciphertexts)})", len(ks))
        new_bound = self.bound * max((abs(k) for k in ks), default=0)
        self.layout.check_bound(new_bound, "mul_scalar")
        n2 = self.public_key.nsquare
        engine = compute.as_engine(executor)
        width = self.public_key.ciphertext_bytes
        cts = engine.map(compute.power_kernel,
                         [(int(n2), compute.Ints(self.ciphertexts[a:b], width), ks[a:b])
                          for a, b in compute.spans(len(ks), engine)], width)
        return self._derive(new_bound, cts)

    def rerandomize(self, *, method: str = "djn", executor: EngineLike = None,
                    factors: Sequence[int] = (), base: PublicKey | None = None) -> EncryptedArray:
        """Same plaintexts, fresh randomness (multiply by fresh encryptions of 0).

        ``factors``: encryptions of 0 made ahead (:class:`~dpdpca.crypto.randomizers.RandomizerPool`)
        for the first ``len(factors)`` ciphertexts; the rest get new ones of ``method``.
        ``base``: the key (same ``n``) whose DJN base ``hs`` makes the new
        factors, e.g. :meth:`PublicKey.with_own_base`; default this array's key.
        """
        key = self.public_key if base is None else base
        if int(key.n) != int(self.public_key.n):
            raise KeyMismatchError("base must have this array's modulus n, got another key")
        if len(factors) > len(self.ciphertexts):
            raise param_error("factors", f"at most one per ciphertext ({len(self.ciphertexts)})", len(factors))
        n2 = key.nsquare
        head = [c * f % n2 for c, f in zip(self.ciphertexts, factors)]
        rest = self.ciphertexts[len(head):]
        if not rest:
            return self._derive(self.bound, head)
        engine = compute.as_engine(executor)
        compute.register_public(key)
        width = key.ciphertext_bytes
        cts = engine.map(compute.rerandomize_kernel,
                         [(int(key.n), int(key.hs), method, compute.Ints(rest[a:b], width))
                          for a, b in compute.spans(len(rest), engine)], width)
        return self._derive(self.bound, head + list(cts))

    def repack(self, layout: SlotLayout, *, chunks: Sequence[int] | None = None,
               executor: EngineLike = None) -> EncryptedArray:
        """The values of one-slot ciphertexts packed into ``layout``, under encryption.

        Output ciphertext k is ``prod_j E[a_j]**(2**(w j)) = E[sum_j a_j 2**(w j)]``
        over its slots (``w = layout.slot_bits``), by Horner's rule: ``w``
        squarings and one multiplication per slot.  Lets values kept one per
        ciphertext travel or decrypt in a layout with wider or narrower slots
        than the one they were encrypted in.

        Parameters
        ----------
        layout : SlotLayout
            The target layout; must fit the key and hold the array's bound.
        chunks : sequence of int or None
            Slots per output ciphertext (each in ``[1, layout.slots]``, summing
            to ``self.length``); default fills every ciphertext.

        Raises
        ------
        ParameterError
            The array has a ciphertext with more than one slot, or bad chunks.
        OverflowRiskError
            The array's bound exceeds ``layout.limit``, or the layout does not
            fit the key.

        Examples
        --------
        >>> from dpdpca.crypto import generate_keypair, encrypt, decrypt, SlotLayout
        >>> pk, sk = generate_keypair(512, insecure_test_key=True)
        >>> singles = encrypt(pk, [3, -4, 5], layout=SlotLayout(slot_bits=16, slots=1), bound=8, chunks=[1, 1, 1])
        >>> packed = singles.repack(SlotLayout(slot_bits=8, slots=2))
        >>> packed.chunks, decrypt(sk, packed)
        ((2, 1), [3, -4, 5])
        """
        if not isinstance(layout, SlotLayout):
            raise type_error("layout", "a SlotLayout", type(layout).__name__)
        if any(c != 1 for c in self.chunks):
            raise param_error("repack: chunks", "1 slot per ciphertext", f"chunks {self.chunks[:4]}...")
        layout.check_key(self.public_key)
        layout.check_bound(self.bound, "repack")
        if chunks is None:
            chunk_t = _default_chunks(self.length, layout.slots)
        else:
            chunk_t = _check_chunks(chunks, layout.slots)
            if sum(chunk_t) != self.length:
                raise param_error("chunks", f"summing to the array's length {self.length}", sum(chunk_t))
        engine = compute.as_engine(executor)
        width = self.public_key.ciphertext_bytes
        starts = [0]
        for c in chunk_t:
            starts.append(starts[-1] + c)
        cts = engine.map(compute.repack_kernel,
                         [(int(self.public_key.nsquare), layout.slot_bits,
                           compute.Ints(self.ciphertexts[starts[a]:starts[b]], width), list(chunk_t[a:b]))
                          for a, b in compute.spans(len(chunk_t), engine)], width)
        return EncryptedArray._trusted(self.public_key, layout, chunk_t, self.bound, cts)

    def with_bound(self, bound: int) -> EncryptedArray:
        """Same ciphertexts under another declared bound (e.g. a public, looser one).

        Raises
        ------
        OverflowRiskError
            ``bound`` beyond the layout's ``limit``.
        """
        bound = check_int("bound", bound, minimum=0)
        self.layout.check_bound(bound, "with_bound")
        return self._derive(bound, list(self.ciphertexts))

    # -- structure ------------------------------------------------------------------------
    def select(self, indices: Sequence[int]) -> EncryptedArray:
        """The ciphertexts at ``indices`` (with their chunk sizes), in that order."""
        m = len(self.ciphertexts)
        idx = [check_int("indices[]", i, minimum=-m, maximum=m - 1) for i in indices]
        return self._derive(self.bound, [self.ciphertexts[i] for i in idx],
                            tuple(self.chunks[i] for i in idx))

    @classmethod
    def concat(cls, arrays: Sequence[EncryptedArray]) -> EncryptedArray:
        """Concatenate arrays under one key and layout; the bound is the largest bound.

        Raises
        ------
        ParameterError
            No arrays, or differing layouts.
        KeyMismatchError
            Differing keys.
        """
        arrays = list(arrays)
        if not arrays:
            raise param_error("arrays", "non-empty", "[]")
        first = arrays[0]
        for a in arrays[1:]:
            first._check_same_key(a, "concat")
            if a.layout != first.layout:
                raise param_error("concat: layout", f"equal to {first.layout}", a.layout)
        return cls._trusted(first.public_key, first.layout, tuple(c for a in arrays for c in a.chunks),
                            max(a.bound for a in arrays), [c for a in arrays for c in a.ciphertexts])

    # -- serialization ----------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The binary batch format of :mod:`dpdpca.crypto.wire`."""
        return wire.encode_batch(self.public_key, self.layout, self.chunks, self.bound, self.ciphertexts)

    @classmethod
    def from_bytes(cls, data: bytes, public_key: PublicKey, *, check_units: bool = True,
                   check_trailer: bool = True) -> EncryptedArray:
        """Parse :meth:`to_bytes` output, validating every field.

        ``check_units=False``: every check but the unit test modulo n, which
        the caller then makes on several arrays at once
        (:func:`dpdpca.crypto.wire.check_units`).  ``check_trailer=False``:
        bytes already checked against a digest that covers them
        (:func:`~dpdpca.crypto.wire.decode_batch`).

        Raises
        ------
        MessageError
            Truncated, corrupted, wrong version, or a ciphertext outside ``[1, n**2)``.
        KeyMismatchError
            Made under another key.
        """
        kind, _dim, layout, chunks, bound, cts = wire.decode_batch(data, public_key, check_units=check_units,
                                                                   check_trailer=check_trailer)
        if kind != wire.KIND_VECTOR:
            raise MessageError(f"message kind must be {wire.KIND_VECTOR} (vector), got {kind}")
        return cls._trusted(public_key, layout, chunks, bound, cts)

    @property
    def nbytes(self) -> int:
        """Size of :meth:`to_bytes` in bytes."""
        return (wire._FIXED.size + len(bk.int_to_bytes(self.bound)) + wire._CARRY.size
                + len(bk.int_to_bytes(self.layout.carry_bound)) + 4 * len(self.chunks)
                + self.public_key.ciphertext_bytes * len(self.ciphertexts) + 32)


def encrypt(public_key: PublicKey, values: Any, *, layout: SlotLayout, bound: int,
            chunks: Sequence[int] | None = None, method: str = "djn", executor: EngineLike = None,
            factors: Sequence[int] | None = None,
            _test_randomness: Callable[[int], int] | None = None) -> EncryptedArray:
    """Pack and encrypt signed integers.

    Parameters
    ----------
    public_key : PublicKey
    values : sequence of int or integer/object ndarray of shape (length,)
        Signed integers with ``|value| <= bound``.
    layout : SlotLayout
        Must fit the key (``slots * slot_bits <= bits(n) - 2``).
    bound : int
        Declared public bound on ``|value|``, ``<= layout.limit``; it is
        written into serialized headers, so it must not be derived from the
        values.
    chunks : sequence of int or None
        Slots per ciphertext (each in ``[1, layout.slots]``, summing to
        ``len(values)``); default fills every ciphertext.
    method : {"djn", "standard"}
        ``"djn"``: ``c = (1 + m n) hs**alpha`` with a random ``alpha`` of
        ``ceil(bits/2)`` bits through the cached fixed-base table (default);
        ``"standard"``: ``c = (1 + m n) r**n``.
    executor : concurrent.futures.Executor or None
        ``None`` = serial in-process; else tasks get bytes and ints.
    factors : sequence of int or None
        Encryptions of zero made ahead (:class:`~dpdpca.crypto.RandomizerPool`,
        ``method`` factors of this key's modulus), exactly one per ciphertext:
        the online work is then one multiplication per ciphertext,
        ``(1 + m n) f mod n**2``, in this process.  The caller hands each
        factor out once.  ``method`` and ``executor`` are then unused.
    _test_randomness : callable or None
        Tests only: ``i -> alpha`` (or ``r``) for ciphertext ``i``.

    Returns
    -------
    EncryptedArray

    Raises
    ------
    OverflowRiskError
        ``bound > layout.limit``, a value beyond ``bound``, or a layout
        that does not fit the key.
    ParameterError
        Non-integer values or inconsistent chunks.

    Examples
    --------
    >>> from dpdpca.crypto import generate_keypair
    >>> pk, sk = generate_keypair(512, insecure_test_key=True)
    >>> layout = SlotLayout(slot_bits=32, slots=4)
    >>> enc = encrypt(pk, [5, -7, 0, 2**31 - 1, -3], layout=layout, bound=2**31 - 1)
    >>> decrypt(sk, enc)
    [5, -7, 0, 2147483647, -3]
    """
    if not isinstance(public_key, PublicKey):
        raise type_error("public_key", "a PublicKey", type(public_key).__name__)
    if method not in METHODS:
        raise param_error("method", f"one of {METHODS}", method)
    layout.check_key(public_key)
    bound = check_int("bound", bound, minimum=0)
    layout.check_bound(bound, "encrypt")
    vals = as_int_list("values", values)
    checked = _as_int64(vals)
    _check_values_within("values", checked, bound)
    if chunks is None:
        chunk_t = _default_chunks(len(vals), layout.slots)
    else:
        chunk_t = _check_chunks(chunks, layout.slots)
        if sum(chunk_t) != len(vals):
            raise param_error("chunks", f"summing to len(values) = {len(vals)}", sum(chunk_t))
    n = public_key.n
    sb = layout.slot_bits
    plaintexts = [bk.mpz(P % n) for P in pack_many(checked, chunk_t, sb)]
    if factors is not None:
        if len(factors) != len(plaintexts) or _test_randomness is not None:
            raise param_error("factors", f"exactly one per ciphertext ({len(plaintexts)}) and no _test_randomness",
                              len(factors))
        fs = [bk.mpz(f) for f in factors]
        wire.check_ciphertexts(fs, public_key, "factors", units=False)
        return EncryptedArray._trusted(public_key, layout, chunk_t, bound, public_key.raw_encrypt_with(plaintexts, fs))
    engine = compute.as_engine(executor)
    compute.register_public(public_key)
    rand = None if _test_randomness is None else [int(_test_randomness(i)) for i in range(len(plaintexts))]
    pw = (public_key.bits + 7) // 8
    per_worker = -(-len(plaintexts) // max(1, engine.workers))
    cts = engine.map(compute.encrypt_kernel,
                     [(int(n), int(public_key.hs), method, compute.Ints(plaintexts[a:b], pw),
                       None if rand is None else rand[a:b], per_worker)
                      for a, b in compute.spans(len(plaintexts), engine)],
                     public_key.ciphertext_bytes)
    return EncryptedArray._trusted(public_key, layout, chunk_t, bound, cts)


def encryptions_of_zero(public_key: PublicKey, count: int, *, method: str = "djn",
                        executor: EngineLike = None) -> list[bk.mpz]:
    """``count`` fresh randomizers (``hs**alpha`` under ``public_key``'s base, or ``r**n``), e.g. made ahead.

    The data-independent part of :func:`encrypt` (its ``factors``) and of
    :meth:`EncryptedArray.rerandomize`.  DJN factors on an engine of several
    workers share one fixed-base table split by rows
    (:func:`~dpdpca.crypto.compute.shared_table_powers`: each row built once,
    not once per worker); ``r**n`` factors are drawn and exponentiated by
    each worker for its part.

    Examples
    --------
    >>> from dpdpca.crypto import generate_keypair
    >>> pk, sk = generate_keypair(512, insecure_test_key=True)
    >>> zeros = encryptions_of_zero(pk, 3)
    >>> [int(m) for m in sk.raw_decrypt(zeros)]
    [0, 0, 0]
    """
    if not isinstance(public_key, PublicKey):
        raise type_error("public_key", "a PublicKey", type(public_key).__name__)
    if method not in METHODS:
        raise param_error("method", f"one of {METHODS}", method)
    count = check_int("count", count, minimum=0)
    engine = compute.as_engine(executor)
    if method == "djn" and not isinstance(engine, compute.SerialEngine) and engine.workers > 1 and count:
        # one table for the whole batch, its rows split over the workers (built once, not once per worker)
        return compute.shared_table_powers(engine, int(public_key.hs), int(public_key.nsquare),
                                           public_key.alpha_bits, count, public_key.ciphertext_bytes)
    compute.register_public(public_key)
    spans = compute.spans(count, engine, None if isinstance(engine, compute.SerialEngine)
                          else -(-count // max(1, 4 * engine.workers)) or 1)
    per_worker = -(-count // max(1, engine.workers))
    return engine.map(compute.factors_kernel, [(int(public_key.n), int(public_key.hs), method, b - a, per_worker)
                                               for a, b in spans], public_key.ciphertext_bytes)


def decrypt(private_key: PrivateKey, enc: EncryptedArray, *, executor: EngineLike = None) -> list[int]:
    """Decrypt (CRT, batched) and unpack to ``enc.length`` signed Python ints.

    Raises
    ------
    KeyMismatchError
        ``enc`` was made under another key.
    MessageError
        A plaintext that does not fit the declared layout or bound (tampering,
        or a false declared bound); the message names the array and its
        bound, never which ciphertext or slot (that is a function of the plaintexts).
    OverflowRiskError
        Several slots per ciphertext whose bound exceeds the layout's
        ``max_abs`` (a carrying layout's intermediate value: subtract the known
        part first, :meth:`EncryptedArray.sub_plain`).
    ParameterError
        ``executor`` is a remote engine (Dask): the secret key never leaves the
        key holder's host.
    """
    return decrypt_many(private_key, [enc], executor=executor)[0]


def decrypt_many(private_key: PrivateKey, arrays: Sequence[EncryptedArray], *, executor: EngineLike = None,
                 names: Sequence[str] | None = None) -> list[list[int]]:
    """:func:`decrypt` of every array, their ciphertexts in one batch: one list of ints per array.

    One engine map over all the arrays' ciphertexts together, so a pool
    decrypts them with one guided schedule (its tasks shrink towards the end
    of the whole batch) instead of one per array, each with its own tail of
    idle workers; the integers are those :func:`decrypt` gives per array.
    ``names``: how a message error names each array (default ``array k``
    when there are several).

    Raises
    ------
    KeyMismatchError, MessageError, OverflowRiskError, ParameterError
        As :func:`decrypt`, for the first array that fails.

    Examples
    --------
    >>> from dpdpca.crypto import generate_keypair, encrypt, SlotLayout
    >>> pk, sk = generate_keypair(512, insecure_test_key=True)
    >>> layout = SlotLayout(slot_bits=16, slots=4)
    >>> a = encrypt(pk, [1, -2, 3], layout=layout, bound=10)
    >>> b = encrypt(pk, [7], layout=layout, bound=10)
    >>> decrypt_many(sk, [a, b])
    [[1, -2, 3], [7]]
    """
    if not isinstance(private_key, PrivateKey):
        raise type_error("private_key", "a PrivateKey", type(private_key).__name__)
    arrays = list(arrays)
    if names is not None and len(names) != len(arrays):
        raise param_error("names", f"one per array ({len(arrays)})", len(names))
    pub = private_key.public_key
    for enc in arrays:
        if not isinstance(enc, EncryptedArray):
            raise param_error("enc", "an EncryptedArray", type(enc).__name__)
        if enc.public_key != pub:
            raise KeyMismatchError(f"decrypt: ciphertexts must be under key {pub.fingerprint[:16]}..., "
                                   f"got {enc.public_key.fingerprint[:16]}...")
        enc.layout.check_decryptable(enc.bound, enc.chunks)
    engine = compute.as_engine(executor)
    compute.check_local_for_secret(engine, "decrypt")
    compute.register_private(private_key)
    cts = [c for enc in arrays for c in enc.ciphertexts]
    plain = _decrypt_batch(private_key, cts, engine)
    n = pub.n
    results: list[list[int]] = []
    pos = 0
    for k, enc in enumerate(arrays):
        mine = plain[pos:pos + len(enc.ciphertexts)]
        pos += len(enc.ciphertexts)
        out, bad = unpack_many([centred(m, n) for m in mine], enc.chunks, enc.layout.slot_bits, enc.bound)
        if bad is not None:
            where = f"{names[k]}: " if names is not None else f"array {k}: " if len(arrays) > 1 else ""
            # never which ciphertext: the first that does not fit is a function of the plaintexts
            raise MessageError(f"{where}every ciphertext must decrypt to its declared slots with |slot| <= "
                               f"{enc.bound}, got a plaintext that does not fit (tampered, or a false declared bound)")
        results.append(out)
    return results


def _decrypt_batch(private_key: PrivateKey, cts: list[bk.mpz], engine: compute.Engine) -> list[bk.mpz]:
    """Plaintexts in ``[0, n)`` of ``cts`` on ``engine`` (local: the caller checked).

    In process: :meth:`PrivateKey.raw_decrypt`.  On a pool the unit of work is
    a CRT half (:func:`~dpdpca.crypto.compute.half_spans`: every ciphertext's
    half modulo p, then every half modulo q), so the workers get equal work
    even for a batch of a few dozen ciphertexts, where whole decryptions in
    tasks of :data:`~dpdpca.crypto.compute.MIN_TASK` left one worker with the
    last task alone; the halves are joined here (one multiplication modulo p each).
    """
    pub = private_key.public_key
    key_args = (int(pub.n), int(pub.hs), int(private_key.p), int(private_key.q))
    if isinstance(engine, compute.SerialEngine):
        return engine.map(compute.decrypt_kernel, [(*key_args, compute.Ints(cts, pub.ciphertext_bytes))],
                          (pub.bits + 7) // 8)
    count = len(cts)
    width = pub.ciphertext_bytes
    tasks = [(*key_args, compute.Ints(cts[min(a, count):min(b, count)], width),
              compute.Ints(cts[max(a, count) - count:max(b, count) - count], width))
             for a, b in compute.half_spans(count, engine)]
    halves = engine.map(compute.decrypt_halves_kernel, tasks, (pub.bits + 7) // 8)
    return private_key.crt_join(halves[:count], halves[count:])


def sum_arrays(arrays: Sequence[EncryptedArray], *, executor: EngineLike = None) -> EncryptedArray:
    """Slot-wise sum of arrays with one key, layout and chunking (Wang–Chang eqs. 11-13).

    One ``a * b % n**2`` per ciphertext and array after the first.

    Raises
    ------
    KeyMismatchError
        Arrays under different keys.
    OverflowRiskError
        The sum of the bounds exceeds the layout's ``limit``.
    ParameterError
        No arrays, or differing layouts or chunks.
    """
    arrays = list(arrays)
    if not arrays:
        raise param_error("arrays", "non-empty", "[]")
    first = arrays[0]
    for a in arrays[1:]:
        first._check_same_shape(a, "sum_arrays")
    new_bound = sum(a.bound for a in arrays)
    first.layout.check_bound(new_bound, f"sum_arrays of {len(arrays)} arrays")
    n2 = first.public_key.nsquare
    if len(arrays) == 1:
        cts = list(first.ciphertexts)
    else:
        engine = compute.as_engine(executor)
        width = first.public_key.ciphertext_bytes
        count = len(first.ciphertexts)
        cts = engine.tree_product(n2, width, [[compute.Ints(a.ciphertexts[lo:hi], width) for a in arrays]
                                              for lo, hi in compute.spans(count, engine, engine.product_items(count))])
    return first._derive(new_bound, cts)


def _check_packed_operands(enc_scalar: EncryptedArray, vectors: Sequence[Sequence[int]],
                           vector_bound: int) -> tuple[list[list[int]], int]:
    if not isinstance(enc_scalar, EncryptedArray):
        raise param_error("enc_scalar", "an EncryptedArray", type(enc_scalar).__name__)
    if enc_scalar.chunks != (1,):
        raise param_error("enc_scalar", "exactly one ciphertext holding one slot",
                          f"chunks {enc_scalar.chunks[:4]}")
    vector_bound = check_int("vector_bound", vector_bound, minimum=0)
    layout = enc_scalar.layout
    vecs = []
    for k, v in enumerate(vectors):
        iv = as_int_list(f"vectors[{k}]", v)
        if not 1 <= len(iv) <= layout.slots:
            raise param_error(f"len(vectors[{k}])", f"in [1, {layout.slots}]", len(iv))
        _check_values_within(f"vectors[{k}]", iv, vector_bound)
        vecs.append(iv)
    new_bound = enc_scalar.bound * vector_bound
    layout.check_bound(new_bound, "scalar_times_packed")
    return vecs, new_bound


def scalar_times_packed(enc_scalar: EncryptedArray, vectors: Sequence[Sequence[int]], *, vector_bound: int,
                        executor: EngineLike = None) -> EncryptedArray:
    """``E[x]**pack(w) = E[pack(x * w)]`` for one encrypted scalar and many packed vectors.

    Ciphertext ``k`` of the result holds the slots ``x * vectors[k]``.  The
    base is preprocessed once (``P_t = c**(B**t)``); each vector then costs one
    Straus multi-exponentiation with exponents of ``bits(vector_bound) + 1``
    bits instead of a ``slots * slot_bits``-bit exponentiation.

    Parameters
    ----------
    enc_scalar : EncryptedArray
        Exactly one ciphertext holding one slot ``x``.
    vectors : sequence of sequences of int
        Each of length ``1..layout.slots`` with ``|w_j| <= vector_bound``.
    vector_bound : int
        Declared public bound on ``|w_j|``; result bound = ``bound(x) * vector_bound``.

    Raises
    ------
    OverflowRiskError
        ``bound(x) * vector_bound > layout.limit``, or an entry beyond ``vector_bound``.
    ParameterError
        ``enc_scalar`` holds more than one slot, or a vector of bad length.

    References
    ----------
    Wang–Chang eqs. (18)-(19): ``E[v_i]**(b_j)``, here for a whole window of ``j``.
    """
    vecs, new_bound = _check_packed_operands(enc_scalar, vectors, vector_bound)
    key = enc_scalar.public_key
    n2 = key.nsquare
    sb = enc_scalar.layout.slot_bits
    c = enc_scalar.ciphertexts[0]
    offset = max(vector_bound, 1)
    engine = compute.as_engine(executor)
    width = key.ciphertext_bytes
    cts = engine.map(compute.packed_power_kernel,
                     [(int(n2), sb, compute.Ints([c], width), vecs[a:b], offset)
                      for a, b in compute.spans(len(vecs), engine, max(64, engine.task_items(len(vecs))))],
                     width)
    return enc_scalar._derive(new_bound, cts, tuple(len(v) for v in vecs))


def scalars_times_packed(enc_scalars: EncryptedArray, vectors: Sequence[Sequence[Sequence[int]]], *,
                         vector_bound: int, executor: EngineLike = None) -> EncryptedArray:
    """:func:`scalar_times_packed` for many single-slot ciphertexts at once.

    ``enc_scalars`` holds one single-slot ciphertext per scalar (``chunks`` all
    1); ``vectors[i]`` are the vectors for scalar ``i``.  The result is the
    concatenation, in order, of the per-scalar results; with an executor the
    scalars run in parallel.
    """
    if not isinstance(enc_scalars, EncryptedArray) or any(c != 1 for c in enc_scalars.chunks):
        raise param_error("enc_scalars", "an EncryptedArray of single-slot ciphertexts", enc_scalars)
    if len(vectors) != len(enc_scalars.ciphertexts):
        raise param_error("vectors", f"one list per scalar ({len(enc_scalars.ciphertexts)})", len(vectors))
    singles = [enc_scalars.select([i]) for i in range(len(vectors))]
    checked = [_check_packed_operands(s, v, vector_bound) for s, v in zip(singles, vectors)]
    key = enc_scalars.public_key
    sb = enc_scalars.layout.slot_bits
    offset = max(vector_bound, 1)
    engine = compute.as_engine(executor)
    width = key.ciphertext_bytes
    cts = engine.map(compute.packed_power_kernel,
                     [(int(key.nsquare), sb, compute.Ints(s.ciphertexts, width), v, offset)
                      for s, (v, _b) in zip(singles, checked)], width)
    chunks = tuple(len(w) for v, _b in checked for w in v)
    return enc_scalars._derive(max((b for _v, b in checked), default=0), cts, chunks)

