"""MOD-SuLQ noise levels for FPCA (Grammenos et al. 2020, §3.3).

The noise std omega of the symmetric mask of MOD-SuLQ (eq. (6)), of the
streaming, non-symmetric mask of FPCA (eq. (8), Lemma 2), and the minimum batch
size ``T_{eps,delta,d,n}`` of Lemma 2 item 2.

These are the paper's formulas (their own privacy analysis, not the Gaussian
mechanism calibration): we reproduce them as stated.  The one place where the
printed text is wrong is ``T``, see :func:`modsulq_min_batch`.

References
----------
A. Grammenos, R. Mendoza-Smith, J. Crowcroft, C. Mascolo, "Federated Principal
Component Analysis", NeurIPS 2020, §3.3, eqs. (6), (8), Lemma 2.
K. Chaudhuri, A. Sarwate, K. Sinha, "A near-optimal algorithm for
differentially-private principal components", JMLR 2013 (MOD-SuLQ).
"""

from __future__ import annotations

import math

from dpdpca._validation import check_int, check_open_unit, check_positive, param_error

__all__ = ["modsulq_omega", "streaming_modsulq_omega", "modsulq_min_batch"]


def _check(epsilon: float, delta: float, d: int, n: int) -> tuple[float, float, int, int]:
    return (check_positive("epsilon", epsilon), check_open_unit("delta", delta),
            check_int("d", d, minimum=1), check_int("n", n, minimum=1))


def modsulq_omega(epsilon: float, delta: float, d: int, n: int) -> float:
    """Eq. (6): ``(d+1)/(n eps) sqrt(2 log((d^2+d)/(2 delta sqrt(2 pi)))) + 1/(n sqrt(eps))``.

    Std of each entry ``i >= j`` of the symmetric MOD-SuLQ mask for ``X X^T / n``.
    """
    epsilon, delta, d, n = _check(epsilon, delta, d, n)
    arg = (d * d + d) / (2.0 * delta * math.sqrt(2.0 * math.pi))
    if arg <= 1.0:
        raise param_error("delta", f"< (d^2+d)/(2 sqrt(2 pi)) = {(d * d + d) / (2 * math.sqrt(2 * math.pi)):.4g} "
                                   "for eq. (6) to be defined", delta)
    return (d + 1) / (n * epsilon) * math.sqrt(2.0 * math.log(arg)) + 1.0 / (n * math.sqrt(epsilon))


def _streaming_numerator(epsilon: float, delta: float, d: int) -> float:
    arg = d * d / (delta * math.sqrt(2.0 * math.pi))
    if arg <= 1.0:
        raise param_error("delta", f"< d^2/sqrt(2 pi) = {d * d / math.sqrt(2 * math.pi):.4g} "
                                   "for eq. (8) to be defined", delta)
    return 4.0 * d / epsilon * math.sqrt(2.0 * math.log(arg)) + math.sqrt(2.0) / math.sqrt(epsilon)


def streaming_modsulq_omega(epsilon: float, delta: float, d: int, n: int) -> float:
    """Eq. (8) / Lemma 2: ``4d/(eps n) sqrt(2 log(d^2/(delta sqrt(2 pi)))) + sqrt(2)/(sqrt(eps) n)``.

    Std of each i.i.d. entry of FPCA's non-symmetric streaming mask.
    """
    epsilon, delta, d, n = _check(epsilon, delta, d, n)
    return _streaming_numerator(epsilon, delta, d) / n


def modsulq_min_batch(epsilon: float, delta: float, d: int, omega0: float, *, mode: str = "rigorous") -> int | float:
    """Lemma 2 item 2: the smallest batch ``n`` for which a mask of std ``omega0`` suffices.

    ``rigorous`` (default): since eq. (8) is ``K/n`` with
    ``K = 4d/eps sqrt(2 log(d^2/(delta sqrt(2 pi)))) + sqrt(2/eps)``, the condition
    ``omega(n) <= omega0`` is ``n >= K/omega0``: returns ``ceil(K / omega0)`` (an int).

    ``paper``: the printed ``omega0^{-1} [K]^{-1}`` (a float), which has the
    wrong dimension (it decreases as the privacy requirement tightens) and is
    reproduced only for comparison.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_open_unit("delta", delta)
    d = check_int("d", d, minimum=1)
    omega0 = check_positive("omega0", omega0)
    k = _streaming_numerator(epsilon, delta, d)
    if mode == "paper":
        return 1.0 / (omega0 * k)
    if mode != "rigorous":
        raise param_error("mode", "'rigorous' or 'paper'", mode)
    return max(1, math.ceil(k / omega0))
