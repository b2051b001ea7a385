"""Symmetric matrices stored as their packed upper triangle.

The upper triangle (``i <= j``) is flattened row-major: row ``i`` holds the
``d - i`` entries ``(i, i), (i, i+1), ..., (i, d-1)``.  Chunks are
row-aligned: row ``i`` is cut into pieces of at most ``slots`` entries and no
ciphertext crosses a row, so a ciphertext of row ``i`` can be combined with
``E[v_i]**pack(b_j, ..., b_{j+k})`` (Wang–Chang eq. 19) slot for slot.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.crypto import wire
from dpdpca.crypto.compute import EngineLike
from dpdpca.crypto.encrypted import EncryptedArray, as_int_list, decrypt, encrypt
from dpdpca.crypto.keys import PrivateKey, PublicKey
from dpdpca.crypto.packing import SlotLayout
from dpdpca.errors import MessageError
from dpdpca.triangle import upper_triangle_size

__all__ = [
    "upper_triangle_chunks",
    "upper_triangle_flatten",
    "upper_triangle_unflatten",
    "triangle_size",
    "EncryptedSymmetricMatrix",
]


#: The same function as :func:`dpdpca.triangle.upper_triangle_size` (one helper for every layer).
triangle_size = upper_triangle_size


def upper_triangle_chunks(d: int, slots: int) -> tuple[int, ...]:
    """Row-aligned chunk sizes of the row-major upper triangle.

    Examples
    --------
    >>> upper_triangle_chunks(4, 3)
    (3, 1, 3, 2, 1)
    """
    return _upper_triangle_chunks(check_int("d", d, minimum=1), check_int("slots", slots, minimum=1))


@functools.lru_cache(maxsize=64)
def _upper_triangle_chunks(d: int, slots: int) -> tuple[int, ...]:
    # Cached (a tuple, immutable): the proxy derives the same layout for every share it reads.
    out: list[int] = []
    for i in range(d):
        full, rest = divmod(d - i, slots)
        out.extend([slots] * full)
        if rest:
            out.append(rest)
    return tuple(out)


def upper_triangle_flatten(matrix: Any) -> np.ndarray:
    """Square integer matrix (d, d) -> object array (d (d+1) / 2,) of Python ints, row-major ``i <= j``.

    Only the upper triangle is read.
    """
    arr = np.asarray(matrix)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise param_error("matrix", "square (d, d)", f"shape {arr.shape}")
    upper = arr[np.triu_indices(arr.shape[0])]  # row-major i <= j
    out = np.empty(upper.shape[0], dtype=object)
    out[:] = as_int_list("matrix", upper)
    return out


def upper_triangle_unflatten(values: Any, d: int) -> np.ndarray:
    """Inverse of :func:`upper_triangle_flatten`: a symmetric (d, d) object array."""
    d = check_int("d", d, minimum=1)
    vals = as_int_list("values", values if not isinstance(values, np.ndarray) else values.ravel())
    if len(vals) != upper_triangle_size(d):
        raise param_error("values", f"of length d (d + 1) / 2 = {upper_triangle_size(d)}", len(vals))
    flat = np.empty(len(vals), dtype=object)
    flat[:] = vals
    rows, cols = np.triu_indices(d)  # row-major i <= j, the order of upper_triangle_flatten
    out = np.empty((d, d), dtype=object)
    out[rows, cols] = flat
    out[cols, rows] = flat
    return out


class EncryptedSymmetricMatrix:
    """An encrypted symmetric d x d integer matrix (packed upper triangle).

    Parameters
    ----------
    d : int
        Dimension, >= 1.
    array : EncryptedArray
        ``d (d + 1) / 2`` slots in row-major upper-triangle order.

    Attributes
    ----------
    d : int
    array : EncryptedArray
    """

    def __init__(self, d: int, array: EncryptedArray) -> None:
        self.d = check_int("d", d, minimum=1)
        if not isinstance(array, EncryptedArray):
            raise param_error("array", "an EncryptedArray", type(array).__name__)
        if array.length != upper_triangle_size(self.d):
            raise param_error("array.length", f"d (d + 1) / 2 = {upper_triangle_size(self.d)}", array.length)
        self.array = array

    def __repr__(self) -> str:
        return f"EncryptedSymmetricMatrix(d={self.d}, {self.array!r})"

    @property
    def public_key(self) -> PublicKey:
        return self.array.public_key

    @property
    def bound(self) -> int:
        return self.array.bound

    @classmethod
    def encrypt_upper_triangle(cls, public_key: PublicKey, int_matrix: Any, *, layout: SlotLayout,
                               bound: int, executor: EngineLike = None,
                               method: str = "djn") -> EncryptedSymmetricMatrix:
        """Encrypt the upper triangle of a square integer matrix with row-aligned chunks.

        Raises
        ------
        OverflowRiskError
            An entry of the upper triangle beyond ``bound``, or ``bound`` beyond the layout.
        """
        flat = upper_triangle_flatten(int_matrix)
        d = int(np.asarray(int_matrix).shape[0])
        enc = encrypt(public_key, flat, layout=layout, bound=bound,
                      chunks=upper_triangle_chunks(d, layout.slots), executor=executor, method=method)
        return cls(d, enc)

    def decrypt(self, private_key: PrivateKey, *, executor: EngineLike = None) -> np.ndarray:
        """The symmetric (d, d) object array of Python ints."""
        return upper_triangle_unflatten(decrypt(private_key, self.array, executor=executor), self.d)

    def add(self, other: EncryptedSymmetricMatrix, *, executor: EngineLike = None
            ) -> EncryptedSymmetricMatrix:
        """Entry-wise sum (same key, layout and chunking)."""
        if not isinstance(other, EncryptedSymmetricMatrix) or other.d != self.d:
            raise param_error("other", f"an EncryptedSymmetricMatrix with d = {self.d}", other)
        return EncryptedSymmetricMatrix(self.d, self.array.add(other.array, executor=executor))

    __add__ = add

    def to_bytes(self) -> bytes:
        """Binary batch format with kind = symmetric and ``dim = d``."""
        a = self.array
        return wire.encode_batch(a.public_key, a.layout, a.chunks, a.bound, a.ciphertexts,
                                 kind=wire.KIND_SYMMETRIC, dim=self.d)

    @classmethod
    def from_bytes(cls, data: bytes, public_key: PublicKey) -> EncryptedSymmetricMatrix:
        """Parse :meth:`to_bytes` output (see :meth:`EncryptedArray.from_bytes`)."""
        kind, dim, layout, chunks, bound, cts = wire.decode_batch(data, public_key)
        if kind != wire.KIND_SYMMETRIC or dim < 1 or upper_triangle_size(dim) != sum(chunks):
            raise MessageError(f"message must be a symmetric matrix of d (d + 1) / 2 slots, "
                               f"got kind {kind}, d {dim}, {sum(chunks)} slots")
        return cls(dim, EncryptedArray._trusted(public_key, layout, chunks, bound, cts))

    @property
    def nbytes(self) -> int:
        return self.array.nbytes
