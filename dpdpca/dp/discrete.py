"""Exact samplers over the integers (Canonne, Kamath & Steinke 2020).

Every accept/reject decision here is made in exact integer arithmetic: a
Bernoulli(p) with rational ``p = a/b`` is "a uniform integer below ``b`` is
below ``a``", and Bernoulli(exp(-gamma)) for rational ``gamma`` is CKS
Algorithm 1.  No floating-point number enters an acceptance step, so the output
distribution is *exactly* the discrete Laplace / discrete Gaussian (given
uniform random bits), with none of the floating-point artefacts that break the
privacy of textbook float samplers (Mironov 2012).

Speed: everything is vectorized with numpy over the batch, and CKS
Algorithm 1's loop runs over the batch at once (every element still active
has the same ``k``, so each step is one array of draws).  The discrete-Laplace
proposal of CKS Algorithm 3 runs on one ``int64`` word while the scale ``t``
is below ``2**62``, and on (high, low) word pairs compared lexicographically
up to ``t < 2**125``; above that the proposal runs on Python integers (slower,
same distribution).  Each uniform draw reads only the bytes it needs
(:func:`_uniform_below`, :func:`_words`), since reading the OS entropy
source is a large part of the cost.

Lazy comparisons, still exact.  CKS Algorithm 1's step "Bernoulli(f/k)" for
``f`` in [0, 1) is Bernoulli(1/k) and "V < f" for a fresh uniform real V in
[0, 1).  V is drawn lazily: with ``g = floor(f 2**B)`` (``B = _WORD_BITS``),
V's top B bits ``w`` decide ``V < f`` exactly when ``w != g`` (``w < g``
implies ``V < (w+1)/2**B <= g/2**B <= f``; ``w > g`` implies
``V >= (g+1)/2**B > f``).  On a tie (probability ``2**-B``) the rest of V is
uniform on [0, 1), and ``V < f`` iff it is below ``r/D`` where ``f = (g + r/D)/2**B``:
one exact uniform integer below ``D`` compared with ``r``.  Equivalently, the
decision is ``w D + X < f D 2**B`` for uniform ``w < 2**B`` and ``X < D``: a
uniform integer compared with an integer.  This runs for

* the discrete Laplace's Bernoulli(exp(-U/t)), ``f = U/t`` (``g = floor(U 2**B / t)``
  in int64 while ``t < 2**(63 - B)``; ``D = t``);
* the Gaussian acceptance Bernoulli(exp(-gamma)), ``gamma = num/den`` of hundreds
  of bits: ``floor(gamma 2**B) = whole 2**B + g`` gives ``whole`` Bernoulli(exp(-1))
  factors and the fraction ``f`` (``D = den``).  ``floor(gamma 2**B)`` comes from
  exact int64 bounds (:func:`_exponent_top_bounds`) wherever they pin it (all but
  a few proposals), and from Python integers held in numpy ``object`` arrays
  elsewhere.

References
----------
C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020, arXiv:2004.00010: Algorithm 1 (Bernoulli(exp(-gamma))),
Algorithm 2 (discrete Laplace), Algorithm 3 (discrete Gaussian).
"""

from __future__ import annotations

from fractions import Fraction
from math import floor, isqrt
from numbers import Integral, Rational
from typing import Any, Callable

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.dp.randomness import NoiseSource, resolve_source

__all__ = [
    "bernoulli_exp_neg",
    "sample_discrete_laplace",
    "sample_discrete_gaussian",
    "as_positive_fraction",
]

_VECTOR_LIMIT = 1 << 125
_INT64_LIMIT = 1 << 63

_WORD_BITS = 12
"""Bits of V compared at once in the lazy Gaussian acceptance (1..63).

Ties, which fall back to exact Python integers, have probability
``2**-_WORD_BITS`` per comparison; few bits also let int64 bounds pin
``floor(gamma 2**B)`` for almost every proposal.  Tests change it to exercise
the fallback (2 bits) and the Python-integer paths (32, 63).
"""


def as_positive_fraction(name: str, value: Any) -> Fraction:
    """``value`` (int, Fraction or finite float, converted exactly) as a Fraction > 0."""
    if isinstance(value, bool):
        raise param_error(name, "a positive int or Fraction", value)
    if isinstance(value, (Integral, Rational)):
        f = Fraction(int(value)) if isinstance(value, Integral) else Fraction(value)
    elif isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            raise param_error(name, "finite", value)
        f = Fraction(float(value))
    else:
        raise param_error(name, "a positive int or Fraction", value)
    if f <= 0:
        raise param_error(name, "> 0", value)
    return f


# --- Bernoulli(exp(-gamma)), scalar and exact (CKS Algorithm 1) -------------

def _bernoulli_exp_neg_unit(num: int, den: int, src: NoiseSource) -> bool:
    """Bernoulli(exp(-num/den)) for ``0 <= num <= den`` (CKS Algorithm 1)."""
    k = 1
    while src.randbelow(den * k) < num:  # A ~ Bernoulli(gamma / k)
        k += 1
    return k % 2 == 1


def bernoulli_exp_neg(num: int, den: int, rng: Any = None) -> bool:
    """One exact draw of Bernoulli(exp(-num/den)) for integers ``num >= 0``, ``den >= 1``.

    CKS Algorithm 1 on ``floor(gamma)`` factors of exp(-1) and the fractional
    remainder; integer arithmetic only.
    """
    num = check_int("num", num, minimum=0)
    den = check_int("den", den, minimum=1)
    return _bernoulli_exp_neg(num, den, resolve_source(rng))


def _bernoulli_exp_neg(num: int, den: int, src: NoiseSource) -> bool:
    whole, rem = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_neg_unit(1, 1, src):
            return False
    return _bernoulli_exp_neg_unit(rem, den, src)


# --- uniform words --------------------------------------------------------

def _uniform_below(bound: int, n: int, src: NoiseSource) -> np.ndarray:
    """``n`` exact uniform integers in ``[0, bound)`` as int64, ``1 <= bound < 2**63``.

    Reading the OS entropy source is a large part of the sampler's cost, so each
    draw takes only the bytes it needs: a word of ``8 b`` bits with ``2**(8 b) >= 16 bound``
    (or 64 bits), accepted below the largest multiple of ``bound`` that fits it
    (probability >= 15/16, or 1/2 for 64-bit words) and reduced ``mod bound``.
    """
    if bound == 1:
        return np.zeros(n, dtype=np.int64)
    bits = min(64, 8 * ((bound.bit_length() + 4 + 7) // 8))
    limit = ((1 << bits) // bound) * bound
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        w = _words(n - filled, bits, src)
        if limit < 1 << bits:
            w = w[w < limit]  # Python ints below 2**bits: compared in the word's own dtype
        out[filled:filled + w.size] = w % bound
        filled += w.size
    return out


_WORD_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _words(n: int, bits: int, src: NoiseSource) -> np.ndarray:
    """``n`` uniform ``bits``-bit words (1..64), ``ceil(bits / 8)`` bytes of the source each.

    uint8/16/32 when a word is 1, 2 or 4 bytes, else uint64 (3, 5, 6 or 7 bytes are
    zero-extended: any fixed map of uniform bytes to integers is uniform).
    """
    nbytes = (bits + 7) // 8
    raw = src.words((n * nbytes + 7) // 8).view(np.uint8)[:n * nbytes]
    if nbytes in _WORD_DTYPES:
        w = raw.view(_WORD_DTYPES[nbytes])
    else:
        wide = np.zeros((n, 8), dtype=np.uint8)
        wide[:, :nbytes] = raw.reshape(n, nbytes)
        w = wide.view(np.uint64).ravel()
    extra = 8 * nbytes - bits
    return w >> w.dtype.type(extra) if extra else w


# --- vectorized pieces of the discrete-Laplace proposal ---------------------

def _wide_split(t: int) -> int:
    """Bits kept in the low word when ``t`` is held as (high, low) int64 words (0: one word)."""
    return max(0, t.bit_length() - 62)


def _uniform_below_wide(t: int, size: int, src: NoiseSource) -> tuple[np.ndarray, np.ndarray | None]:
    """``size`` exact uniform integers in ``[0, t)`` as (high, low) words, ``value = high << s | low``.

    ``s = _wide_split(t)``.  For ``s = 0`` this is :func:`_uniform_below` and
    ``low`` is None.  Otherwise ``high`` is uniform in ``[0, t >> s]`` and ``low`` is
    ``s`` uniform bits (``s <= 63``); pairs with ``value >= t`` are rejected (rate <= 1/2).
    """
    sh = _wide_split(t)
    if sh == 0:
        return _uniform_below(t, size, src), None
    t_hi, t_lo = t >> sh, t & ((1 << sh) - 1)
    his, los, got = [], [], 0
    while got < size:
        m = 2 * (size - got) + 8
        hi = _uniform_below(t_hi + 1, m, src)
        lo = _words(m, sh, src).astype(np.int64)
        ok = (hi < t_hi) | (lo < t_lo)
        his.append(hi[ok])
        los.append(lo[ok])
        got += int(ok.sum())
    return np.concatenate(his)[:size], np.concatenate(los)[:size]


def _less_wide(w: tuple[np.ndarray, np.ndarray | None], u: tuple[np.ndarray, np.ndarray | None]) -> np.ndarray:
    """Entrywise ``w < u`` for (high, low) pairs split at the same bit."""
    if w[1] is None or u[1] is None:
        return w[0] < u[0]
    return (w[0] < u[0]) | ((w[0] == u[0]) & (w[1] < u[1]))


def _take_wide(u: tuple[np.ndarray, np.ndarray | None], idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    return u[0][idx], None if u[1] is None else u[1][idx]


def _bernoulli_exp_neg_ratio_vec(u: tuple[np.ndarray, np.ndarray | None], t: int,
                                 src: NoiseSource) -> np.ndarray:
    """Bernoulli(exp(-u_i/t)) per entry, ``0 <= u_i < t < 2**125`` (CKS Alg. 1, vectorized).

    Every element still active in the loop has the same ``k``.  Bernoulli(u/(t k)) is:

    * Bernoulli(1/k) and ``V < u/t`` for a lazy uniform V while ``t < 2**(63 - _WORD_BITS)``
      (:func:`_bernoulli_exp_neg_frac_lazy`);
    * else a uniform ``W < t k`` below ``u`` while ``t k < 2**63``;
    * else ``W = j t + w`` with ``j < k`` and ``w < t``: since ``u < t``, ``W < u`` iff
      ``j == 0`` and ``w < u``.
    """
    bits = _WORD_BITS
    if u[1] is None and t < 1 << (63 - bits):  # lazily, as the Gaussian acceptance: V < u/t, 2**bits at a time
        uu = u[0]
        g = (uu << bits) // t  # floor(u 2**bits / t), exact in int64

        def tie(idx: np.ndarray) -> np.ndarray:  # the rest of V is uniform: below (u 2**bits - g t) / t?
            return _uniform_below(t, idx.size, src) < (uu[idx] << bits) - g[idx] * t

        return _bernoulli_exp_neg_frac_lazy(g, tie, src)
    n = u[0].size
    accept = np.zeros(n, dtype=bool)
    active = np.arange(n)
    k = 1
    while active.size:
        if u[1] is None and t * k < _INT64_LIMIT:
            hit = _uniform_below(t * k, active.size, src) < u[0][active]
        else:
            j = _uniform_below(k, active.size, src) if k > 1 else np.zeros(active.size, dtype=np.int64)
            w = _uniform_below_wide(t, active.size, src)
            hit = (j == 0) & _less_wide(w, _take_wide(u, active))
        if k % 2 == 1:
            accept[active[~hit]] = True  # the loop stopped at an odd k
        active = active[hit]
        k += 1
    return accept


def _bernoulli_exp_neg_one_vec(n: int, src: NoiseSource) -> np.ndarray:
    """``n`` draws of Bernoulli(exp(-1)) (CKS Alg. 1 with gamma = 1: Bernoulli(1/k) steps).

    The step at ``k = 1`` is Bernoulli(1) and always succeeds: no draw.
    """
    accept = np.zeros(n, dtype=bool)
    active = np.arange(n)
    k = 2
    while active.size:
        hit = _uniform_below(k, active.size, src) == 0
        if k % 2 == 1:
            accept[active[~hit]] = True
        active = active[hit]
        k += 1
    return accept


def _geometric_vec(n: int, src: NoiseSource) -> np.ndarray:
    """Number of Bernoulli(exp(-1)) successes before the first failure, per entry."""
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        ok = _bernoulli_exp_neg_one_vec(active.size, src)
        v[active[ok]] += 1
        active = active[ok]
    return v


def _laplace_proposals_vec(t: int, n: int, src: NoiseSource) -> np.ndarray:
    """About ``n`` accepted ``X = U + t V`` of CKS Algorithm 2 (before the sign step), t < 2**125.

    int64 when every value fits, else an ``object`` array of Python ints.
    """
    m = int(n / 0.6) + 16
    u = _uniform_below_wide(t, m, src)
    u = _take_wide(u, np.flatnonzero(_bernoulli_exp_neg_ratio_vec(u, t, src)))
    v = _geometric_vec(u[0].size, src)
    if u[1] is None:
        if t * (int(v.max(initial=0)) + 1) < _INT64_LIMIT:
            return u[0] + v * t
        return u[0].astype(object) + v.astype(object) * t
    sh = _wide_split(t)
    return ((u[0].astype(object) << sh) | u[1].astype(object)) + v.astype(object) * t


def _laplace_proposal_scalar(t: int, src: NoiseSource) -> int:
    """One accepted ``X = U + t V`` of CKS Algorithm 2, on Python integers."""
    while True:
        u = src.randbelow(t)
        if not _bernoulli_exp_neg_unit(u, t, src):
            continue
        v = 0
        while _bernoulli_exp_neg_unit(1, 1, src):
            v += 1
        return u + t * v


def _discrete_laplace_array(t: int, s: int, size: int, src: NoiseSource) -> np.ndarray:
    """About ``size`` draws of DLap(t/s): P[y] proportional to exp(-|y| s / t) (CKS Algorithm 2).

    int64 or ``object`` array (Python ints); possibly a few more or fewer than
    ``size`` (callers take what they need and ask again).
    """
    if t < _VECTOR_LIMIT:
        x = _laplace_proposals_vec(t, size, src)
    else:
        x = np.empty(size, dtype=object)
        x[:] = [_laplace_proposal_scalar(t, src) for _ in range(size)]
    if x.dtype != object and s >= _INT64_LIMIT:
        x = x.astype(object)
    neg = ((src.words((x.size + 63) // 64)[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).ravel()
    neg = neg[:x.size].astype(bool)
    y = x // s if s != 1 else x
    keep = ~(neg & (y == 0))  # reject -0 so that 0 is not counted twice
    return np.where(neg, -y, y)[keep]


def _discrete_laplace_ints(t: int, s: int, size: int, src: NoiseSource) -> list[int]:
    """``size`` draws of DLap(t/s) as Python ints."""
    out: list[int] = []
    while len(out) < size:
        out.extend(_discrete_laplace_array(t, s, size - len(out), src)[:size - len(out)].tolist())
    return out


# --- the discrete Gaussian's acceptance, lazy and exact ---------------------

def _bernoulli_exp_neg_int_vec(whole: np.ndarray, src: NoiseSource) -> np.ndarray:
    """Bernoulli(exp(-whole_i)) per entry: ``whole_i`` successes of Bernoulli(exp(-1)) in a row.

    ``whole`` is int64, or ``object`` when some entry is larger: then it runs in
    rounds of at most ``2**62`` successes (a second round is never reached in
    practice, but nothing is cut short).
    """
    ok = np.ones(whole.size, dtype=bool)
    rest: np.ndarray | None = whole
    while rest is not None:
        if rest.dtype == object:
            left = np.minimum(rest, 1 << 62).astype(np.int64)
            rest = rest - left
        else:
            left, rest = rest.copy(), None
        active = np.flatnonzero(ok & (left > 0))
        while active.size:
            hit = _bernoulli_exp_neg_one_vec(active.size, src)
            ok[active[~hit]] = False
            left[active] -= 1
            active = active[hit & (left[active] > 0)]
        if rest is not None and not (ok & (rest > 0)).any():
            rest = None
    return ok


def _split_top(top: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """``(top >> bits, top & (2**bits - 1))`` from uint64 or ``object`` ``top``: int64 (or ``object``) and uint64."""
    if top.dtype == object:
        try:
            top = top.astype(np.uint64)
        except OverflowError:  # some gamma_i >= 2**(64 - bits): split on Python ints
            whole = top >> bits
            try:
                whole = whole.astype(np.int64)
            except OverflowError:
                pass
            return whole, (top & ((1 << bits) - 1)).astype(np.uint64)
    return (top >> np.uint64(bits)).astype(np.int64), top & np.uint64((1 << bits) - 1)


def _bernoulli_exp_neg_frac_lazy(g: np.ndarray, tie: Callable[[np.ndarray], np.ndarray],
                                 src: NoiseSource) -> np.ndarray:
    """Bernoulli(exp(-f_i)) per entry for ``f_i`` in [0, 1) given ``g_i = floor(f_i 2**B)`` (int64), exact.

    CKS Algorithm 1 (``k += 1`` while Bernoulli(f/k); accept iff the final ``k`` is
    odd), every active entry at the same ``k``.  Bernoulli(f/k) is Bernoulli(1/k) and
    ``V < f`` for a fresh uniform real V, whose top ``B = _WORD_BITS`` bits ``w``
    decide unless ``w == g_i``; then ``tie(idx)`` decides ``V < f`` exactly for those
    entries (module docstring).
    """
    bits = _WORD_BITS
    accept = np.zeros(g.size, dtype=bool)
    active = np.arange(g.size)
    k = 1
    while active.size:
        if k > 1:
            step = _uniform_below(k, active.size, src) == 0  # Bernoulli(1/k)
            if k % 2 == 1:
                accept[active[~step]] = True
            active = active[step]
            if not active.size:
                break
        w = _words(active.size, bits, src).astype(np.int64)
        gi = g[active]
        hit = w < gi
        ties = np.flatnonzero(w == gi)
        if ties.size:
            hit[ties] = tie(active[ties])
        if k % 2 == 1:
            accept[active[~hit]] = True  # the loop stopped at an odd k
        active = active[hit]
        k += 1
    return accept


def _bernoulli_exp_neg_lazy_vec(top: np.ndarray, remainder: Callable[[int], int], den: int,
                                src: NoiseSource) -> np.ndarray:
    """Bernoulli(exp(-gamma_i)) per entry, exact, from ``top_i = floor(gamma_i 2**B)`` (``B = _WORD_BITS``).

    ``whole`` Bernoulli(exp(-1)) factors, then :func:`_bernoulli_exp_neg_frac_lazy`
    on the fraction.  ``top`` is a uint64 or ``object`` array; on a tie (probability
    ``2**-B`` per comparison) ``remainder(i) = (gamma_i 2**B - top_i) den``, an
    integer in ``[0, den)``, decides with one exact ``randbelow(den)``.
    """
    whole, g = _split_top(top, _WORD_BITS)
    accept = np.zeros(whole.size, dtype=bool)
    alive = np.flatnonzero(_bernoulli_exp_neg_int_vec(whole, src))

    def tie(idx: np.ndarray) -> np.ndarray:
        return np.array([src.randbelow(den) < remainder(int(alive[i])) for i in idx.tolist()], dtype=bool)

    accept[alive] = _bernoulli_exp_neg_frac_lazy(g[alive].astype(np.int64), tie, src)
    return accept


def _mul_shift(v: np.ndarray, k: int, r: int) -> np.ndarray:
    """``floor(v_i k / 2**r)`` exactly, for uint64 ``v_i < 2**63``, ``0 < k <= 2**32``, ``32 <= r < 96``.

    ``v = v1 2**32 + v0``: ``v1 k < 2**63`` and ``v0 k < 2**64``, and
    ``floor(v k / 2**r) = floor((v1 k + floor(v0 k / 2**32)) / 2**(r - 32))``.
    """
    ku, lo32 = np.uint64(k), np.uint64(0xFFFFFFFF)
    return ((v >> np.uint64(32)) * ku + (((v & lo32) * ku) >> np.uint64(32))) >> np.uint64(r - 32)


def _exponent_top_bounds(a: np.ndarray, p: int, q: int, t: int,
                         bits: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Integer bounds ``lo_i <= floor(gamma_i 2**bits) <= hi_i`` from int64 arithmetic (None: out of range).

    ``gamma_i = (a_i - c)^2 / (2 sigma^2)`` with ``c = p / (q t)``, ``sigma^2 = p/q``, int64 ``a_i >= 0``.
    With ``C = round(c 2**F)`` and ``x = a 2**F - C``, ``|(a - c) 2**F|`` lies within 1/2 of
    ``|x|``; with ``m = |x| >> s < 2**31`` it lies in ``[m 2**s - 1/2, (m + 1) 2**s]``, so
    ``gamma 2**bits`` lies in ``[(m^2 - m) L, (m + 1)^2 L]`` for ``L = 2**(bits + 2s - 2F) / (2 sigma^2)``
    (``s >= 0``).  ``L`` is rounded down and up to 32-bit multipliers, and the products
    are taken exactly on 32-bit halves (:func:`_mul_shift`).  Where ``lo == hi`` the floor is exact.
    """
    qt = q * t
    a_max = int(a.max(initial=0))
    f = 61 - max(a_max, -(-p // qt)).bit_length()
    if f < 0:
        return None
    x = (a << f) - ((2 * (p << f) + qt) // (2 * qt))  # |x| < 2**61 + 1: a 2**f and c 2**f are below 2**61
    m = np.abs(x).astype(np.uint64)
    sh = max(0, int(m.max(initial=0)).bit_length() - 31)
    m >>= np.uint64(sh)
    lam = Fraction(q << bits, 2 * p) * Fraction(2) ** (2 * sh - 2 * f)
    r = 31 - (lam.numerator.bit_length() - lam.denominator.bit_length())
    while floor(lam * Fraction(2) ** r) >= 1 << 32:
        r -= 1
    while floor(lam * Fraction(2) ** r) < 1 << 31:
        r += 1
    if not 32 <= r < 96:
        return None
    k = floor(lam * Fraction(2) ** r)
    return _mul_shift(m * m - m, k, r), _mul_shift((m + np.uint64(1)) ** 2, k + 1, r)


def _exponent_top_exact(a: np.ndarray, p: int, q: int, t: int, bits: int) -> np.ndarray:
    """``floor(gamma_i 2**bits)`` on Python integers (``object`` array), ``gamma_i = (a_i q t - p)^2 / (2 p q t^2)``."""
    d = a.astype(object) * (q * t) - p
    return ((d * d) << bits) // (2 * p * q * t * t)


def _discrete_gaussian_accept(y: np.ndarray, p: int, q: int, t: int, src: NoiseSource) -> np.ndarray:
    """CKS Algorithm 3's acceptance of proposals ``y``: Bernoulli(exp(-(|y| q t - p)^2 / (2 p q t^2))).

    ``floor(gamma 2**B)`` comes from :func:`_exponent_top_bounds` where those
    bounds meet (int64 proposals, all but about ``2**(B - 19) gamma_max`` of them),
    and from Python integers for the rest.
    """
    bits = _WORD_BITS
    a = np.abs(y)
    bounds = _exponent_top_bounds(a, p, q, t, bits) if a.dtype == np.int64 else None
    if bounds is None:
        top = _exponent_top_exact(a, p, q, t, bits)
    else:
        top, hi = bounds
        open_ = np.flatnonzero(top != hi)
        if open_.size:
            exact = _exponent_top_exact(a[open_], p, q, t, bits)
            try:
                top[open_] = exact.astype(np.uint64)
            except OverflowError:
                top = top.astype(object)
                top[open_] = exact
    qt, den = q * t, 2 * p * q * t * t

    def remainder(i: int) -> int:
        return ((int(a[i]) * qt - p) ** 2 << bits) % den

    return _bernoulli_exp_neg_lazy_vec(top, remainder, den, src)


def sample_discrete_laplace(scale: Fraction | int, size: int, rng: Any = None) -> list[int]:
    """Exact draws of the discrete Laplace distribution on the integers.

    ``P[Y = y] = (1 - e^{-1/b}) / (1 + e^{-1/b}) * exp(-|y| / b)`` with scale
    ``b = scale`` (a positive rational, e.g. ``Fraction(sensitivity) / Fraction(epsilon)``).

    Parameters
    ----------
    scale : int or Fraction, > 0
        The scale ``b = t / s``.  A float is converted exactly (``Fraction(float)``).
    size : int, >= 0
    rng : None or numpy.random.Generator
        None: OS entropy.  A Generator only for experiments.

    Returns
    -------
    list of int, length ``size``

    References
    ----------
    Canonne, Kamath & Steinke (2020), Algorithm 2.
    """
    b = as_positive_fraction("scale", scale)
    size = check_int("size", size, minimum=0)
    return _discrete_laplace_ints(b.numerator, b.denominator, size, resolve_source(rng))


def sample_discrete_gaussian(sigma_squared: Fraction | int, size: int, rng: Any = None) -> list[int]:
    """Exact draws of the discrete Gaussian N_Z(0, sigma^2) on the integers.

    ``P[Y = y]`` is proportional to ``exp(-y^2 / (2 sigma^2))`` for every integer
    ``y``.  CKS Algorithm 3: propose ``Y ~ DLap(t)`` with ``t = floor(sigma) + 1``
    and accept with probability ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``.  With
    ``sigma^2 = p/q`` the exponent is the rational
    ``(|Y| q t - p)^2 / (2 p q t^2)``, so the acceptance is exact integer
    arithmetic.  Note ``sigma^2`` is the parameter, not the variance: the
    variance is slightly below ``sigma^2``: by 2e-7 relative at ``sigma = 1``, 1e-15
    at ``sigma^2 = 2``, and negligibly beyond.

    Parameters
    ----------
    sigma_squared : int or Fraction, > 0
        Exact rational ``sigma^2`` (a float is converted exactly).
    size : int, >= 0
    rng : None or numpy.random.Generator
        None: OS entropy (production).  A Generator only for experiments.

    Returns
    -------
    list of int
        Python integers (any size), length ``size``.

    Raises
    ------
    ParameterError
        If ``sigma_squared`` is not a positive rational or ``size`` is negative.

    References
    ----------
    Canonne, Kamath & Steinke (2020), Algorithm 3 and Theorem 4 (runtime).

    Examples
    --------
    >>> import numpy as np
    >>> len(sample_discrete_gaussian(100, 5, rng=np.random.default_rng(1)))
    5
    """
    s2 = as_positive_fraction("sigma_squared", sigma_squared)
    size = check_int("size", size, minimum=0)
    src = resolve_source(rng)
    p, q = s2.numerator, s2.denominator
    t = isqrt(p // q) + 1  # floor(sigma) + 1
    chunks: list[np.ndarray] = []
    got, rate = 0, 0.75  # CKS Thm 4: a constant acceptance rate (about 0.76 for large sigma, 0.5 at 1/2)
    while got < size:
        need = size - got
        y = _discrete_laplace_array(t, 1, int(need / rate) + 16, src)
        ok = _discrete_gaussian_accept(y, p, q, t, src)
        rate = max(0.1, min(1.0, int(ok.sum()) / max(y.size, 1)) * 0.95)
        y = y[ok][:need]
        chunks.append(y)
        got += y.size
    if not chunks:
        return []
    return list(np.concatenate(chunks).tolist()) if len(chunks) > 1 else list(chunks[0].tolist())
