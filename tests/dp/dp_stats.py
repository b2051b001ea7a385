"""Shared helpers for the DP tests: a chi-square test against an exact pmf."""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Iterable

import numpy as np
from scipy import stats

P_MIN = 1e-4  # fixed significance for every statistical test in tests/dp


def chi_square_p(samples: Iterable[int], pmf: Callable[[int], float], support: range) -> float:
    """p-value of a chi-square goodness-of-fit test of integer samples against ``pmf``.

    Values in ``support`` whose expected count is >= 5 get their own bin; every
    other value (including the two tails) is pooled into one bin.
    """
    counts = Counter(samples)
    n = sum(counts.values())
    obs, exp = [], []
    rest_obs, rest_p = n, 1.0
    for k in support:
        p = pmf(k)
        if p * n >= 5:
            obs.append(counts.get(k, 0))
            exp.append(p * n)
            rest_obs -= counts.get(k, 0)
            rest_p -= p
    if rest_p * n >= 5:
        obs.append(rest_obs)
        exp.append(rest_p * n)
    else:  # fold the remainder into the last bin
        obs[-1] += rest_obs
        exp[-1] += max(rest_p, 0.0) * n
    exp_arr = np.array(exp)
    exp_arr *= n / exp_arr.sum()
    return float(stats.chisquare(obs, exp_arr).pvalue)


def discrete_gaussian_pmf(sigma2: float) -> Callable[[int], float]:
    """Exact (to float64) pmf of N_Z(0, sigma2), normalised by direct summation."""
    bound = int(40 * math.sqrt(sigma2)) + 10
    norm = math.fsum(math.exp(-k * k / (2 * sigma2)) for k in range(-bound, bound + 1))
    return lambda k: math.exp(-k * k / (2 * sigma2)) / norm


