"""The proxy's mask b: its bound, its total-variation cost and its draw.

``v' = v + b`` hides the column sums from the data user (Wang & Chang,
Alg. 1 lines 6-7); the mask's statistical distance between neighbouring
datasets is added to the release's delta (:func:`mask_tv_bound`).
"""

from __future__ import annotations

import math
from typing import Any

from dpdpca.dp import resolve_source

__all__ = ["mask_bound", "mask_tv_bound", "draw_mask"]


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
    ``N * b~`` (which would leave ``v' = v (mod N)`` and leak ``v mod N``),
    so ``v' mod N`` is uniform whatever v is.
    ``source`` is for tests only; production always uses
    ``dpdpca.dp.resolve_source(None)`` (the OS CSPRNG).
    """
    bound = mask_bound(n, frac_bits=frac_bits, kappa=kappa)
    src = resolve_source(None) if source is None else source
    # No rejection of "unlucky" draws: conditioning b on anything (even on not
    # being all multiples of N) would bias v' mod N and leak v mod N.
    return [int(x) for x in src.uniform_ints(-bound, bound, d)]
