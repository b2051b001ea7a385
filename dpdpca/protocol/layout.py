"""The public chunk layout of a share: which slots each ciphertext holds.

Centred release: ``R`` travels as its row-aligned, packed upper triangle
(:func:`dpdpca.crypto.upper_triangle_chunks`; the mask term
``E[v_i]**pack(b_a..b_{a+k})`` needs every ciphertext inside one row) and
``v`` as ``d`` single slots and as ``d`` windows
``W_a = v[a : min(a + slots, d)]`` (the mask terms need both shapes).

Add/remove release: there is no mask, so nothing needs row alignment.  The
row-major upper triangle is cut into consecutive full tiles
(``ceil(d (d + 1) / 2 / slots)`` ciphertexts instead of
``sum_m ceil(m / slots)``: 51 instead of 87 at d = 64 with 41 slots), ``v``
into ``ceil(d / slots)`` tiles, and ``N 2**2f`` is one more ciphertext.

Every party derives the same layout from ``d`` and the slot count, so none
of it travels.
"""

from __future__ import annotations

import functools

from dpdpca.crypto import upper_triangle_chunks
from dpdpca.triangle import upper_triangle_size

__all__ = ["row_chunk_spans", "window_chunks", "tile_chunks", "triangle_chunk_count", "release_r_chunks",
           "share_chunks", "share_counts", "release_ciphertext_count"]


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


def triangle_chunk_count(d: int, slots: int) -> int:
    """``len(upper_triangle_chunks(d, slots))`` in O(1): ``sum_{m=1..d} ceil(m / slots)``."""
    q, r = divmod(d, slots)
    return slots * upper_triangle_size(q) + (q + 1) * r


def tile_chunks(d: int, slots: int) -> list[int]:
    """Sizes of the consecutive tiles ``v[a : a + slots]``, ``a = 0, slots, 2 slots, ...``."""
    return [min(slots, d - a) for a in range(0, d, slots)]


def release_r_chunks(release: str, d: int, slots: int) -> list[int]:
    """Chunk sizes of R (and of R'' / R~): row-aligned for the centred release, dense tiles for add/remove."""
    if release == "add-remove":
        return tile_chunks(upper_triangle_size(d), slots)
    return list(upper_triangle_chunks(d, slots))


def _r_count(release: str, d: int, slots: int) -> int:
    if release == "add-remove":
        return -(-upper_triangle_size(d) // slots)
    return triangle_chunk_count(d, slots)


def share_counts(release: str, d: int, slots: int) -> dict[str, int]:
    """Section name -> ciphertext count of :func:`share_chunks`, in O(1) (checked before any O(d^2) list)."""
    if release == "add-remove":
        return {"R": _r_count(release, d, slots), "v": -(-d // slots), "N": 1}
    return {"R": _r_count(release, d, slots), "v": d, "vwin": d}


def share_chunks(release: str, d: int, slots: int) -> dict[str, list[int]]:
    """Section name -> chunk sizes of one share (and of the proxy's aggregate) for ``release``.

    The centred release sends ``R``, ``v`` (d single slots) and ``vwin`` (d
    windows); the add/remove release sends ``R``, ``v`` (tiles) and ``N``.
    The order is the order the owners' signed digest covers.
    """
    return {name: list(chunks) for name, chunks in _share_chunks(release, d, slots)}


@functools.lru_cache(maxsize=32)
def _share_chunks(release: str, d: int, slots: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
    # Cached (immutable): the proxy derives the same layout for every share it reads.
    r = release_r_chunks(release, d, slots)
    if release == "add-remove":
        return (("R", tuple(r)), ("v", tuple(tile_chunks(d, slots))), ("N", (1,)))
    return (("R", tuple(r)), ("v", (1,) * d), ("vwin", tuple(window_chunks(d, slots))))


def release_ciphertext_count(release: str, d: int, slots: int, v_slots: int | None = None) -> int:
    """Ciphertexts the proxy sends the data user: R'' (or R~), v packed in tiles, and N~ (add/remove).

    ``v_slots``: slots per tile of v' when it travels in a layout of its own
    (the centred release under wide packing); default ``slots``.
    """
    v_slots = slots if v_slots is None else v_slots
    return _r_count(release, d, slots) + -(-d // v_slots) + (1 if release == "add-remove" else 0)
