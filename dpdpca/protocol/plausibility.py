"""Plausibility of a decrypted release: what the public bounds imply, checked before anything is published.

Every honest owner clips its rows to ``||x|| <= 1`` and quantizes them toward
zero, so each integer row has ``sum_i x_i**2 <= 2**(2f)``.  Whatever the data,
the exact aggregate of such rows therefore satisfies (data units, N rows):

* **row count**: ``N >= 0``;
* **trace**: ``tr R <= N`` (``tr R = sum ||x||**2``);
* **mean norm**: ``||v|| <= N`` (``||sum x|| <= sum ||x||``);
* **psd**: ``R - v v^T / N`` is positive semidefinite, i.e. the block matrix
  ``K = [[N, v^T], [v, R]] = sum [1; x] [1; x]^T`` is (Schur complement).

In integer units ``K_int = sum [2**f; x] [2**f; x]^T = [[N 2**2f, 2**f v^T],
[2**f v, R]]``, every check exact.  A listed owner that encrypts anything
else (a poisoned ``R_00``, a negative row count, a value that overflows its
slot) breaks one of them unless it stays inside what honest rows could
produce.  The data user sees the aggregate plus DP noise of public standard
deviations (the proxy states them in its release, ``noise_sigma_int``), so
each check allows the noise's tail at a false-alarm rate of
:data:`FALSE_ALARM` / 4 (a union bound: an honest release is refused with
probability at most :data:`FALSE_ALARM` = 1e-9).  The tolerances are
functions of public parameters only (the sigmas, d, f, N_max), never of the data.

Tails used (the discrete Gaussian ``N_Z(0, s**2)`` is ``s**2``-sub-Gaussian,
Canonne, Kamath & Steinke 2020, Prop. 1, and so is a sum of independent ones
with the variance proxies added):

* one coordinate or a fixed linear form with variance proxy ``V``:
  ``P(z > sqrt(2 V ln(1/a))) <= a`` (Chernoff);
* the norm of a d-vector of independent ``s**2``-sub-Gaussian coordinates:
  ``P(||z||**2 > s**2 (d + 2 sqrt(d t) + 2 t)) <= exp(-t)`` (Hsu, Kakade &
  Zhang 2012, Thm 1);
* the operator norm of a symmetric noise matrix with independent entries on
  and above the diagonal: the smaller of the Frobenius bound (the same
  theorem, weights 1 on the diagonal and 2 off it) and a 1/4-net bound
  ``||E|| <= 2 max_{u in net} |u^T E u|``, ``|net| <= 9**D``, each
  ``u^T E u`` with variance proxy ``<= 2 s_max**2`` (Vershynin, HDP Cor. 4.2.13
  and Ex. 4.4.3), each at half the check's rate.

The psd check computes ``lambda_min`` in floating point; it allows
``8 D eps F`` more for the rounding of ``eigvalsh`` (backward stable), where
``F`` is a public bound on ``||K||_F``, never ``||K||_F`` itself (a proxy that
chose the plaintexts would read them back from it): on the event the noise
bound ``b`` holds (``||E||_op <= b``), an honest ``K = K_true + E`` has
``||K||_F <= tr K_true + sqrt(D) b`` (``K_true`` is psd, ``E`` has rank
``<= D``), and ``tr K_true <= (c**2 + 1) N_max 2**2f`` (add/remove,
``N <= N_max = max_owners * max_rows_per_owner``) or ``N_max**2 2**2f``
(centred).  So every tolerance is a function of d, f, N_max and the stated
sigmas only: a refusal prints it, and prints nothing computed from a
decrypted value (:func:`_refuse`, :func:`slot_range_refusal`).

Under the centred release the user learns N exactly (signed counts, checked
before decrypting) and ``v' = v + b`` (masked), so the mean-norm check
cannot be made there; the trace and psd checks run on
``M = N*S_int + G''`` (``tr(N S_int) <= N**2 2**2f``, ``S_int`` psd).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpdpca.errors import ImplausibleReleaseError, MessageError

__all__ = [
    "CHECKS",
    "FALSE_ALARM",
    "PlausibilityReport",
    "add_remove_tolerances",
    "centred_tolerances",
    "check_add_remove_release",
    "check_centred_release",
    "one_sided_tail",
    "parse_noise_sigmas",
    "slot_range_refusal",
    "symmetric_noise_norm_bound",
    "vector_norm_tail",
]

#: Probability that an honest release is refused, at most (each of the four checks gets a quarter).
FALSE_ALARM = 1e-9
#: The checks, in the order they run.
CHECKS = ("row count", "trace", "mean norm", "psd")
_PER_CHECK = FALSE_ALARM / len(CHECKS)


def one_sided_tail(variance_proxy: float, alpha: float) -> float:
    """``s`` with ``P(z > s) <= alpha`` for a ``variance_proxy``-sub-Gaussian z: ``sqrt(2 V ln(1/alpha))``."""
    return math.sqrt(2.0 * variance_proxy * math.log(1.0 / alpha))


def vector_norm_tail(sigma: float, dim: int, alpha: float) -> float:
    """``r`` with ``P(||z|| > r) <= alpha`` for ``dim`` independent ``sigma**2``-sub-Gaussian coordinates (HKZ Thm 1)."""
    t = math.log(1.0 / alpha)
    return sigma * math.sqrt(dim + 2.0 * math.sqrt(dim * t) + 2.0 * t)


def symmetric_noise_norm_bound(groups: Sequence[tuple[float, int, int]], dim: int, alpha: float) -> float:
    """``b`` with ``P(||E||_op > b) <= alpha`` for a symmetric ``dim x dim`` noise matrix.

    Parameters
    ----------
    groups : sequence of (sigma, n_diagonal, n_off_diagonal)
        The independent entries on and above the diagonal, grouped by their
        sub-Gaussian sigma: ``n_diagonal`` diagonal entries and
        ``n_off_diagonal`` entries above it (each also below it).
    dim : int
    alpha : float in (0, 1)

    Returns
    -------
    float
        The smaller of the Frobenius bound and the 1/4-net bound, each at ``alpha / 2``.
    """
    a = alpha / 2.0
    t = math.log(1.0 / a)
    weighted = [(w * s * s, count) for s, nd, no in groups for w, count in ((1.0, nd), (2.0, no)) if count]
    trace = sum(ws * c for ws, c in weighted)
    trace_sq = sum(ws * ws * c for ws, c in weighted)
    top = max((ws for ws, _ in weighted), default=0.0)
    frobenius = math.sqrt(trace + 2.0 * math.sqrt(trace_sq * t) + 2.0 * top * t)
    s_max = max((s for s, nd, no in groups if nd or no), default=0.0)
    net = 4.0 * s_max * math.sqrt(dim * math.log(9.0) + math.log(2.0 / a))
    return min(frobenius, net)


@dataclass(frozen=True)
class PlausibilityReport:
    """The checks a release passed: per check, the statistic and the tolerance it was held to."""

    statistics: Mapping[str, float]
    tolerances: Mapping[str, float]
    false_alarm: float = FALSE_ALARM


def parse_noise_sigmas(value: Any, blocks: Sequence[str]) -> dict[str, float]:
    """The release's stated noise sigmas (integer units), strictly: an object of finite numbers >= 0.

    Raises
    ------
    MessageError
        Missing, not an object with exactly ``blocks``, or a value that is not a finite number >= 0.
    """
    if not isinstance(value, Mapping) or sorted(value) != sorted(blocks):
        raise MessageError(f"result noise_sigma_int must be an object with keys {sorted(blocks)}, got "
                           f"{sorted(value)[:8] if isinstance(value, Mapping) else type(value).__name__}")
    out = {}
    for b in blocks:
        s = value[b]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < 0:
            raise MessageError(f"result noise_sigma_int.{b} must be a finite number >= 0, got {str(s)[:40]!r}")
        out[b] = float(s)
    return out


def _refuse(check: str, what: str, tolerance: float) -> ImplausibleReleaseError:
    """The refusal, naming the check and its public tolerance, never the statistic.

    The statistic is computed from decrypted plaintexts of a release the user
    refuses, and a malicious proxy chooses what those are (it could put one
    owner's encrypted count where N goes): printing it, or anything computed
    from it, would echo a value that is not the release.  So this takes no
    statistic, and ``tolerance`` must be a function of public parameters only
    (d, f, N_max and the stated sigmas: :func:`add_remove_tolerances`,
    :func:`centred_tolerances`).
    """
    exc = ImplausibleReleaseError(f"release must pass the '{check}' check ({what}, allowing the noise's tail at "
                                  f"false-alarm {FALSE_ALARM:g}), got a statistic above its tolerance "
                                  f"{tolerance:.6g} (an owner's share outside the public bounds, or a release "
                                  f"not made from the shares); nothing was published")
    exc.check = check
    return exc


def slot_range_refusal() -> ImplausibleReleaseError:
    """The refusal of a release whose plaintexts do not decrypt into the public range (a slot overflowed).

    Fixed text: the crypto layer's reason is not forwarded, since which
    ciphertext, slot or section failed first, and by how much, are functions of
    plaintexts a malicious proxy chose (it could make the index of the first
    overflowing ciphertext encode one owner's count).
    """
    exc = ImplausibleReleaseError("release must pass the 'slot range' check (every decrypted slot within the bound "
                                  "its section declares, at most the public bound of the aggregate), got a plaintext "
                                  "outside it (an owner's share outside the public bounds, or a release not made "
                                  "from the shares); nothing was published")
    exc.check = "slot range"
    return exc


def _lambda_min(K: np.ndarray) -> float:
    """The smallest eigenvalue of the symmetric ``K``, in floating point (``eigvalsh``: backward stable)."""
    return float(np.linalg.eigvalsh(K)[0])


def _rounding_allowance(dim: int, frobenius_bound: float) -> float:
    """``8 D eps F``: the room for ``lambda_min``'s rounding when ``||K||_F <= F`` (``F`` public)."""
    return 8.0 * dim * float(np.finfo(np.float64).eps) * frobenius_bound


def _row_zero_weight(sigma_int: Mapping[str, float], frac_bits: int) -> float:
    """``c`` of the psd check's ``D = diag(c, 1, ..., 1)``: row 0's noise evened out against R's (public)."""
    s_r, s_v, s_n = (float(sigma_int[b]) for b in ("R", "v", "N"))
    sv_int = math.ldexp(s_v, frac_bits)
    return min(s_r / sv_int if sv_int > 0 else 1.0, math.sqrt(s_r / s_n) if s_n > 0 else 1.0) if s_r > 0 else 1.0


def add_remove_tolerances(*, d: int, frac_bits: int, sigma_int: Mapping[str, float],
                          n_max: int) -> dict[str, float]:
    """The four checks' tolerances on the add/remove release, from public parameters only (integer units).

    Parameters
    ----------
    d, frac_bits : int
    sigma_int : mapping with keys "R", "v", "N"
        The stated noise sigmas (integer units).
    n_max : int >= 1
        ``max_owners * max_rows_per_owner``: bounds the psd check's rounding allowance.
    """
    f = frac_bits
    s_r, s_v, s_n = (float(sigma_int[b]) for b in ("R", "v", "N"))
    c = _row_zero_weight(sigma_int, f)
    sv_int = math.ldexp(s_v, f)
    noise = symmetric_noise_norm_bound([(c * c * s_n, 1, 0), (c * sv_int, 0, d), (s_r, d, d * (d - 1) // 2)],
                                       d + 1, _PER_CHECK)
    frobenius = math.ldexp((c * c + 1.0) * float(n_max), 2 * f) + math.sqrt(d + 1) * noise
    return {"row count": one_sided_tail(s_n ** 2, _PER_CHECK),
            "trace": one_sided_tail(d * s_r ** 2 + s_n ** 2, _PER_CHECK),
            "mean norm": (math.ldexp(vector_norm_tail(s_v, d, _PER_CHECK / 2), f)
                          + one_sided_tail(s_n ** 2, _PER_CHECK / 2)),
            "psd": noise + _rounding_allowance(d + 1, frobenius)}


def centred_tolerances(*, d: int, frac_bits: int, sigma_int: float, n_max: int) -> dict[str, float]:
    """The centred release's tolerances (trace and psd of ``M``), from public parameters only (integer units)."""
    s = float(sigma_int)
    noise = symmetric_noise_norm_bound([(s, d, d * (d - 1) // 2)], d, _PER_CHECK)
    frobenius = math.ldexp(float(n_max) ** 2, 2 * frac_bits) + math.sqrt(d) * noise
    return {"row count": 0.0,  # exact: N is the sum of signed counts in [1, max_rows]
            "trace": one_sided_tail(d * s * s, _PER_CHECK),
            "psd": noise + _rounding_allowance(d, frobenius)}


def check_add_remove_release(r_upper: Sequence[int], v: Sequence[int], n_scaled: int, *, d: int, frac_bits: int,
                             sigma_int: Mapping[str, float], n_max: int) -> PlausibilityReport:
    """The four checks on the decrypted add/remove release (integer units, exact ints in).

    Parameters
    ----------
    r_upper : sequence of int
        ``R~``'s row-major upper triangle at scale ``2**2f``.
    v : sequence of int
        ``v~`` at scale ``2**f``.
    n_scaled : int
        ``N~ = N 2**2f + z_N``.
    d, frac_bits : int
    sigma_int : mapping with keys "R", "v", "N"
        The noise's standard deviation per block, integer units (every entry
        of a block independent, sub-Gaussian with that sigma).
    n_max : int >= 1
        The declared ``max_owners * max_rows_per_owner`` (the psd check's rounding allowance).

    Returns
    -------
    PlausibilityReport

    Raises
    ------
    ImplausibleReleaseError
        The first check that fails, named, with its (public) tolerance.
    """
    f = frac_bits
    tols = add_remove_tolerances(d=d, frac_bits=f, sigma_int=sigma_int, n_max=n_max)
    stats: dict[str, float] = {}
    # row count: N 2**2f >= 0
    stats["row count"] = float(-n_scaled)
    if stats["row count"] > tols["row count"]:
        raise _refuse("row count", "N >= 0, here -N~ in integer units", tols["row count"])
    # trace: tr R - N 2**2f <= 0; noise sum_i z_ii - z_N
    diag = [int(r_upper[k]) for k in _diagonal_positions(d)]
    stats["trace"] = float(sum(diag) - int(n_scaled))
    if stats["trace"] > tols["trace"]:
        raise _refuse("trace", "tr R <= N, here tr R~ - N~ in integer units", tols["trace"])
    # mean norm: 2**f ||v|| - N 2**2f <= 0; noise <= 2**f ||z_v|| - z_N
    norm_v = math.sqrt(float(sum(int(x) * int(x) for x in v)))
    stats["mean norm"] = math.ldexp(norm_v, f) - float(n_scaled)
    if stats["mean norm"] > tols["mean norm"]:
        raise _refuse("mean norm", "||v|| <= N, here 2^f ||v~|| - N~ in integer units", tols["mean norm"])
    # psd: D K D >= 0 with D = diag(c, 1, ..., 1), c evening out the noise of row 0 against R's
    c = _row_zero_weight(sigma_int, f)
    K = np.empty((d + 1, d + 1), dtype=np.float64)
    rows, cols = np.triu_indices(d)
    vals = np.array([float(x) for x in r_upper], dtype=np.float64)
    K[1 + rows, 1 + cols] = vals
    K[1 + cols, 1 + rows] = vals
    K[0, 0] = c * c * float(n_scaled)
    K[0, 1:] = K[1:, 0] = np.array([c * math.ldexp(float(x), f) for x in v], dtype=np.float64)
    stats["psd"] = -_lambda_min(K)
    if stats["psd"] > tols["psd"]:
        raise _refuse("psd", "R - v v^T / N >= 0, here -lambda_min of [[N~, v~^T], [v~, R~]] in integer units",
                      tols["psd"])
    return PlausibilityReport(stats, tols)


def check_centred_release(M: np.ndarray, n: int, *, frac_bits: int, sigma_int: float,
                          n_max: int) -> PlausibilityReport:
    """The checks the centred release allows: trace and psd of ``M = N S_int + G''`` (N is exact and signed).

    Parameters
    ----------
    M : array of Python ints, shape (d, d)
        ``R'' - v' v'^T``, exactly.
    n : int
        N, the sum of the owners' signed counts.
    frac_bits : int
    sigma_int : float
        The noise's standard deviation per entry of ``G''``, integer units.
    n_max : int >= 1
        The declared ``max_owners * max_rows_per_owner`` (the psd check's rounding allowance).

    Raises
    ------
    ImplausibleReleaseError
        The first check that fails, with its (public) tolerance.
    """
    d = M.shape[0]
    tols = centred_tolerances(d=d, frac_bits=frac_bits, sigma_int=sigma_int, n_max=n_max)
    stats: dict[str, float] = {"row count": float(-n)}
    stats["trace"] = float(sum(int(M[i, i]) for i in range(d)) - n * (n << (2 * frac_bits)))
    if stats["trace"] > tols["trace"]:
        raise _refuse("trace", "tr S <= N, here tr M - N^2 2^2f in integer units", tols["trace"])
    K = np.array([[float(x) for x in row] for row in M], dtype=np.float64)
    stats["psd"] = -_lambda_min(K)
    if stats["psd"] > tols["psd"]:
        raise _refuse("psd", "the centred scatter >= 0, here -lambda_min(M) in integer units", tols["psd"])
    return PlausibilityReport(stats, tols)


def _diagonal_positions(d: int) -> list[int]:
    """Positions of ``R_ii`` in the row-major upper triangle."""
    out, k = [], 0
    for i in range(d):
        out.append(k)
        k += d - i
    return out
