"""The size of a symmetric matrix's upper triangle, for every layer.

The packed upper triangle (row-major ``i <= j``, diagonal included) is the
shape of the noise samplers' output, of the protocol's R section and of the
crypto layer's symmetric matrices.  Its size lives here, at the bottom of the
layering, so that :mod:`dpdpca.crypto` (which may not import
:mod:`dpdpca.linalg`) and everything above share one definition.
"""

from __future__ import annotations

from dpdpca._validation import check_int

__all__ = ["upper_triangle_size"]


def upper_triangle_size(d: int) -> int:
    """``d (d + 1) / 2``: the entries of a symmetric d x d matrix's upper triangle (diagonal included).

    Parameters
    ----------
    d : int >= 0

    Examples
    --------
    >>> upper_triangle_size(3), upper_triangle_size(0)
    (6, 0)
    """
    d = check_int("d", d, minimum=0)
    return d * (d + 1) // 2
