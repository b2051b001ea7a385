"""Noise flooding of BFV ciphertexts: hide the decryption noise from the secret-key holder.

Whoever holds a BFV secret key ``s`` reads more than a plaintext ``m`` from a
ciphertext ``c``: the noise term ``v = c_0 + c_1 s - Delta m (mod q)``.  For
the protocol's aggregate, ``v`` is the sum of the owners' encryption errors
and rounding terms, functions of the individual shares and not only of the
sum.  Flooding adds to ``c_0`` a polynomial ``e`` whose coefficients are
independent and uniform on ``[-F, F)`` with ``F = 2**f``, far above the bound
``B`` on ``|v|``: per coefficient the distributions of ``v + e`` and ``e``
are at statistical distance ``|v| / (2F) <= B / (2F)`` (the smudging lemma),
so over the ``M`` flooded coefficients of a release at most ``M B / (2F)``.
:func:`flood_exponent` picks ``F >= 2**lambda M B`` (``lambda`` =
:data:`STATISTICAL_BITS` = 40): the key holder's view of the noise is then
within ``2**-40`` of a distribution that does not depend on the shares at
all.  Decryption stays exact while ``B + F`` is below ``q / (2t)``; this is
checked before anything is computed, never skipped.

How
---
The flood is the trivial ciphertext ``(e, 0)`` (``c_1 = 0``, so it decrypts
to ``0`` with noise ``e``) as RNS residues, ``e`` modulo each data prime
(:func:`sample_flood`), added to the ciphertext's residues in numpy
(:meth:`~dpdpca.crypto.lattice.BFVArray.add_zeros`): ``c + (e, 0) = (c_0 +
e, c_1)``, coefficient-wise modulo each prime, the ring sum SEAL computes.
BFV ciphertexts are in coefficient form (``is_ntt_form`` false; checked for
an array held as the binding's vectors, read out as residues first).

References
----------
C. Gentry, "Fully homomorphic encryption using ideal lattices", STOC 2009
(noise flooding for circuit privacy).  G. Asharov et al., "Multiparty
computation with low communication, computation and interaction via
threshold FHE", EUROCRYPT 2012, Lemma 2.1 (smudging).
"""

from __future__ import annotations

import math
import secrets
from typing import Sequence

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.crypto.lattice import BFVArray, BFVParameters, BFVPublicKey, _encryptions_of_zero
from dpdpca.errors import MessageError, OverflowRiskError

__all__ = ["STATISTICAL_BITS", "MAX_COEFFICIENT_BITS", "RESERVE_BITS", "flood_exponent", "flood_bfv", "check_flood_room",
           "sample_flood", "ReleaseZeros", "rerandomize_release"]

#: lambda: the key holder's view of a release's noise is within 2**-lambda of share-independent.
STATISTICAL_BITS = 40
#: A release may flood at most 2**MAX_COEFFICIENT_BITS coefficients (ring degree times ciphertexts).
MAX_COEFFICIENT_BITS = 24
#: Bits of q/(2t) a flooded key reserves above its worst-case noise: lambda + log2(max coefficients) + 2.
RESERVE_BITS = STATISTICAL_BITS + MAX_COEFFICIENT_BITS + 2



def flood_exponent(noise: int, coefficients: int, *, statistical_bits: int = STATISTICAL_BITS) -> int:
    """``f`` with ``F = 2**f >= 2**statistical_bits * coefficients * ceil(noise / 2)``.

    Parameters
    ----------
    noise : int
        Worst-case bound on ``|v|`` in half-units (:attr:`~dpdpca.crypto.lattice.BFVArray.noise`).
    coefficients : int
        ``M``, the number of noise coefficients flooded together (ring degree times ciphertexts).
    statistical_bits : int
        ``lambda``; the release's noise is then within ``2**-lambda`` of share-independent.

    Examples
    --------
    Ten fresh encryptions summed at N = 8192 (noise below ``2**22``), two ciphertexts (M = 2**14):

    >>> flood_exponent(10 * (2 * 21 * (2 * 8192 + 1) + 1), 2 * 8192)
    76
    """
    noise = check_int("noise", noise, minimum=1)
    coefficients = check_int("coefficients", coefficients, minimum=1)
    statistical_bits = check_int("statistical_bits", statistical_bits, minimum=1)
    return statistical_bits + math.ceil(math.log2(coefficients * -(-noise // 2)))


def check_flood_room(params: BFVParameters, *, additions: int = 2) -> None:
    """Refuse a key whose ``q/(2t)`` cannot hold the flood of even ``additions`` fresh encryptions.

    An owner's early check (before it encrypts): a key made without
    :data:`RESERVE_BITS` of room would make the proxy refuse the release.

    Raises
    ------
    OverflowRiskError
        ``q/(2t) < 2**RESERVE_BITS`` times the noise of ``additions`` fresh encryptions.
    """
    need = (params.fresh_noise * check_int("additions", additions, minimum=1)) << RESERVE_BITS
    if need >= params.noise_capacity:
        raise OverflowRiskError(f"BFV key must leave room in q/(2t) for the proxy's noise flooding "
                                f"(2**{need.bit_length() - 1} half-units), got 2**{params.noise_capacity.bit_length() - 1}"
                                f" (a key made before flooding: make a new one)")


def sample_flood(ring_degree: int, exponent: int, moduli: tuple[int, ...]) -> np.ndarray:
    """RNS residues of a polynomial with independent coefficients uniform on ``[-2**f, 2**f)``.

    From :mod:`secrets` (never a seeded generator).  Returns a ``uint64``
    array of shape ``(len(moduli), ring_degree)``: row ``i`` holds the
    coefficients modulo ``moduli[i]``.  Exact for any ``f``: the residue is
    computed by Horner's rule over 4-bit digits, which stays below ``2**64``
    for primes below ``2**60`` (SEAL's limit).
    """
    if any(not 2 <= q < 1 << 60 for q in moduli):
        raise OverflowRiskError(f"flooding needs coefficient primes below 2**60, got {[q.bit_length() for q in moduli]}"
                                " bits")
    width = exponent + 1  # u uniform on [0, 2**(f+1)), e = u - 2**f
    nbytes = -(-width // 8)
    raw = np.frombuffer(secrets.token_bytes(ring_degree * nbytes), dtype=np.uint8).reshape(ring_degree, nbytes)
    top = width - 8 * (nbytes - 1)  # big-endian: the first byte keeps `top` bits
    digits = np.empty((2 * nbytes, ring_degree), dtype=np.uint64)
    digits[0::2] = (raw >> 4).T
    digits[1::2] = (raw & 15).T
    digits[0] &= np.uint64(((1 << top) - 1) >> 4)
    digits[1] &= np.uint64(min(15, (1 << top) - 1))
    out = np.empty((len(moduli), ring_degree), dtype=np.uint64)
    for i, q in enumerate(moduli):
        qq, acc, bits = np.uint64(q), np.zeros(ring_degree, dtype=np.uint64), 0
        for row in digits:
            if bits > 60:  # acc * 16 + 15 must stay below 2**64: reduce only when it might not
                np.remainder(acc, qq, out=acc)
                bits = q.bit_length()
            np.left_shift(acc, np.uint64(4), out=acc)
            np.bitwise_or(acc, row, out=acc)
            bits += 4
        np.remainder(acc, qq, out=acc)
        out[i] = (acc + qq - np.uint64(pow(2, exponent, q))) % qq
    return out


def flood_bfv(array: BFVArray, *, statistical_bits: int = STATISTICAL_BITS) -> BFVArray:
    """``array`` with every ciphertext's noise flooded (the proxy's last step before release).

    Adds to each ciphertext a trivial encryption of 0 whose noise is
    uniform on ``[-F, F)``, ``F = 2**f`` from :func:`flood_exponent` with
    ``M`` = ring degree times ciphertexts: the noise term the key holder
    computes is then within statistical distance ``2**-statistical_bits``
    of one independent of the shares.  The values are unchanged.

    Raises
    ------
    OverflowRiskError
        ``B + F`` would reach ``q / (2t)`` (the key was not made with room
        for flooding: :data:`RESERVE_BITS`); checked before computing.
    MessageError
        A ciphertext not at the key's data level or in NTT form (foreign).
    """
    pk = array.public_key
    coefficients = pk.params.ring_degree * array.ciphertext_count
    exponent = flood_exponent(array.noise, coefficients, statistical_bits=statistical_bits)
    noise = array.noise + (2 << exponent)  # half-units: |v + e| <= B + F
    _check_room(pk.params, noise, exponent, coefficients, statistical_bits)
    _check_floodable(array)
    return array.add_zeros(None, noise - array.noise, residues=_flood_residues(pk, array.chunks, exponent))


def _check_room(params: BFVParameters, noise: int, exponent: int, coefficients: int, statistical_bits: int) -> None:
    """Refuse a flood whose total noise bound ``noise`` (half-units) reaches ``q/(2t)`` (OverflowRiskError)."""
    if noise >= params.noise_capacity:
        raise OverflowRiskError(f"BFV flooding needs B + F below q/(2t) = 2**{params.noise_capacity.bit_length() - 2}"
                                f" (F = 2**{exponent}: 2**{statistical_bits} x {coefficients} coefficients x noise "
                                f"bound), got a key without that room (make it with reserve_bits={RESERVE_BITS})")


def _check_floodable(array: BFVArray) -> None:
    """Refuse a ciphertext that is not size 2, in coefficient form, at the key's data level (MessageError).

    An array held as residues is all three by construction (:meth:`BFVArray.from_bytes` reads exactly that
    layout for the key's levels), so only the binding's vectors are asked.
    """
    if array.holds_residues:
        return
    for level, row in zip(array.public_key.levels, array.per_prime_vectors()):
        for vec in row:
            ct = vec.ciphertext()[0]
            if tuple(ct.parms_id()) != level.parms_id or ct.is_ntt_form() or ct.size() != 2:
                raise MessageError("BFV flooding needs size-2 coefficient-form ciphertexts at the key's data level, "
                                   "got a foreign ciphertext")


def _flood_residues(pk: BFVPublicKey, chunks: Sequence[int], exponent: int) -> list[list[np.ndarray]]:
    """Per plaintext prime, per chunk: the residues of the trivial encryption ``(e, 0)`` of 0, ``e`` uniform on
    ``[-2**f, 2**f)`` (:func:`sample_flood`), laid out as :meth:`~dpdpca.crypto.lattice.BFVArray.residues`."""
    n = pk.params.ring_degree
    out = []
    for level in pk.levels:
        row = []
        for _ in chunks:
            e = sample_flood(n, exponent, level.moduli)
            row.append(np.stack([e, np.zeros_like(e)]))
        out.append(row)
    return out


class ReleaseZeros:
    """The encryptions of 0 that rerandomize and flood one release, made ahead (the proxy's offline work).

    Per ciphertext of the release: a fresh public-key encryption of 0
    (:meth:`BFVArray.rerandomize`'s step) plus the trivial ``(e, 0)`` of
    :func:`flood_bfv`, with ``F = 2**f`` sized for any aggregate whose noise
    bound is at most ``max_noise``.  Nothing here depends on the shares: only
    on the key, the release's chunk layout and that public bound, so the
    proxy makes it while the collection is open.  A larger ``max_noise`` than
    the aggregate's only widens ``F`` (the smudging bound ``M B / (2F)`` falls);
    decryption stays exact because ``max_noise`` plus the added noise is
    checked below ``q / (2t)`` when the zeros are made.

    Used once: :meth:`apply` hands the ciphertexts out and forgets them; they
    live only in this process's memory and are never serialized (whoever
    holds ``e`` and the encryption's randomness could strip them off).

    Parameters
    ----------
    public_key : BFVPublicKey
    chunks : sequence of int
        The release's values per ciphertext (as the aggregate's ``chunks``).
    max_noise : int
        The largest aggregate noise bound (half-units) these zeros may hide.
    statistical_bits : int

    Raises
    ------
    OverflowRiskError
        ``max_noise`` plus the added noise would reach ``q / (2t)``.
    """

    def __init__(self, public_key: BFVPublicKey, chunks: Sequence[int], *, max_noise: int,
                 statistical_bits: int = STATISTICAL_BITS) -> None:
        self.public_key = public_key
        self.chunks = tuple(int(c) for c in chunks)
        self.max_noise = check_int("max_noise", max_noise, minimum=0)
        params = public_key.params
        fresh = params.fresh_noise
        coefficients = params.ring_degree * len(self.chunks) * len(params.plain_moduli)
        exponent = flood_exponent(self.max_noise + fresh, coefficients, statistical_bits=statistical_bits)
        self.added_noise = fresh + (2 << exponent)  # half-units: the encryption of 0, then |e| <= F
        # one half-unit more: room for a plaintext folded in ahead (fold_plain), whose rounding adds it
        _check_room(params, self.max_noise + self.added_noise + 1, exponent, coefficients, statistical_bits)
        # the encryption of 0 through the binding; the flood (e, 0) as residues, added to c_0 when the zeros are
        # read out (once, after a plaintext is folded in, if one is: a single conversion either way)
        self._fresh: BFVArray | None = BFVArray(public_key, self.chunks, 0, fresh,
                                                _encryptions_of_zero(public_key, self.chunks))
        self._flood = _flood_residues(public_key, self.chunks, exponent)
        self._zeros: BFVArray | None = None
        self.plain_bound = 0

    def __repr__(self) -> str:  # never the ciphertexts
        state = "used" if self._fresh is None else "ready"
        folded = ", noise folded in" if self.plain_bound else ""
        return f"ReleaseZeros(ciphertexts={len(self.chunks)}, max_noise={self.max_noise}, {state}{folded})"

    def fits(self, array: BFVArray) -> bool:
        """True if unused and made for ``array``'s key and chunks, with room for its noise bound."""
        return (self._fresh is not None and array.public_key == self.public_key and array.chunks == self.chunks
                and array.noise <= self.max_noise)

    def fold_plain(self, values: Sequence[int], *, plain_bound: int) -> None:
        """Add the plaintext ``values`` to these zeros now, once: :meth:`apply` then adds them with the zeros.

        The proxy's add/remove noise is drawn before any share arrives and
        does not depend on them, so it is folded in offline and the release
        makes one addition (in numpy, for an aggregate held as residues)
        instead of a plaintext addition through the binding and a
        conversion.  The same ciphertext either way: SEAL's plaintext
        addition adds the scaled plaintext to ``c_0``, whatever else is
        there.  ``values``: one per slot of the release (its chunks);
        ``plain_bound``: the public bound on them, which :meth:`apply` adds
        to every segment's.

        Raises
        ------
        ParameterError
            Already used or folded, or values of another length.
        OverflowRiskError
            A value beyond ``plain_bound``.
        """
        if self._fresh is None or self.plain_bound:
            raise param_error("values", f"one plaintext folded into unused zeros, {self!r}", "a second one")
        plain_bound = check_int("plain_bound", plain_bound, minimum=1)
        self._fresh = self._fresh.add_plain(values, plain_bound=plain_bound)
        self.plain_bound = plain_bound
        self._zeros = None
        self._read_out()

    def _read_out(self) -> BFVArray:
        """The zeros as residues: the encryption of 0 (and folded plaintext) read out, the flood added to c_0."""
        if self._zeros is None:
            assert self._fresh is not None
            # add_zeros reads the encryption of 0 out as residues (once: the array keeps them) and adds (e, 0)
            self._zeros = self._fresh.add_zeros(None, self.added_noise - self.public_key.params.fresh_noise,
                                                residues=self._flood)
        return self._zeros

    def apply(self, array: BFVArray) -> BFVArray:
        """``array`` rerandomized and flooded (the values unchanged, or plus the folded plaintext), once.

        Raises
        ------
        ParameterError
            Already used, or made for another key, chunk layout or a smaller noise bound.
        MessageError
            A ciphertext not at the key's data level or in NTT form (foreign).
        """
        if not self.fits(array):
            raise param_error("array", f"an unused fit for {self!r} (same key and chunks, noise <= max_noise)",
                              repr(array))
        _check_floodable(array)
        zeros = self._read_out()
        self._fresh = self._zeros = None  # used once
        self._flood = []
        return array.add_zeros(None if array.holds_residues else zeros.per_prime_vectors(), zeros.noise,
                               residues=zeros.residues(), plain_bound=self.plain_bound)


def rerandomize_release(array: BFVArray, *, statistical_bits: int = STATISTICAL_BITS) -> BFVArray:
    """A fresh encryption of 0 added to every ciphertext, then its noise flooded: :class:`ReleaseZeros` made now.

    The same as :func:`flood_bfv` of :meth:`BFVArray.rerandomize` (the exponent sized for the aggregate's own
    noise bound plus the encryption of 0).
    """
    return ReleaseZeros(array.public_key, array.chunks, max_noise=array.noise,
                        statistical_bits=statistical_bits).apply(array)
