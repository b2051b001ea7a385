"""The public chunk layout of a share: which slots each ciphertext holds.

Centred release: ``R`` travels as its row-aligned, packed upper triangle
(:func:`dpdpca.crypto.upper_triangle_chunks`; the mask term
``E[v_i]**pack(b_a..b_{a+k})`` needs every ciphertext inside one row) and
``v`` as ``d`` single slots.  The other mask term needs ``v`` as ``d``
windows ``W_a = v[a : min(a + slots, d)]``; the proxy packs them from the
single slots (:func:`window_chunks`), so v has one encoding only.

Add/remove release: there is no mask, so nothing needs row alignment.  The
row-major upper triangle is cut into consecutive full tiles
(``ceil(d (d + 1) / 2 / slots)`` ciphertexts instead of
``sum_m ceil(m / slots)``: 51 instead of 87 at d = 64 with 41 slots), ``v``
into ``ceil(d / slots)`` tiles, and ``N 2**2f`` is one more ciphertext.

Every party derives the same layout from ``d`` and the slot count, so none
of it travels.  Which shapes a release uses is the release object's
(:meth:`dpdpca.protocol.releases.ProtocolRelease.share_chunks`); this module
holds the shapes.
"""

from __future__ import annotations

from dpdpca.crypto import upper_triangle_chunks
from dpdpca.triangle import upper_triangle_size

__all__ = ["row_chunk_spans", "window_chunks", "tile_chunks", "triangle_chunk_count"]


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
