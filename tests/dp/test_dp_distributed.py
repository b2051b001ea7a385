"""Distributed discrete Gaussian (Kairouz, Liu & Steinke 2021): tau, Proposition 14, calibration, coalitions."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from dpdpca.dp import (
    calibrate_add_remove,
    calibrate_distributed,
    ddg_rdp,
    ddg_tau,
    sample_discrete_gaussian,
)
from dpdpca.errors import ParameterError


def test_tau_matches_theorem_one():
    assert ddg_tau(4, 1) == 0.0
    s2, n = 0.3, 5
    expected = 10 * sum(math.exp(-2 * math.pi ** 2 * s2 * k / (k + 1)) for k in range(1, n))
    assert ddg_tau(s2, n) == pytest.approx(expected, rel=1e-11)
    assert ddg_tau(s2, n) >= expected
    assert 0 < ddg_tau(1e12, 10) <= 1e-299  # underflow never rounds the bound down to 0


def test_proposition_14_terms():
    # tau = 0: the discrete Gaussian's own curve alpha D^2 / (2 sigma^2)
    assert ddg_rdp(7, l2=3.0, l1=6.0, sigma=10.0, tau=0.0, dim=4) == pytest.approx(7 * 9 / 200)
    a, l2, l1, s, t, m = 5, 2.0, 5.0, 3.0, 0.01, 9
    expected = min(a / 2 * (l2 / s) ** 2 + t * m, a / 2 * ((l2 / s) ** 2 + 2 * (l1 / s) * t + t * t * m),
                   a / 2 * (l2 / s + math.sqrt(m) * t) ** 2)
    assert ddg_rdp(a, l2=l2, l1=l1, sigma=s, tau=t, dim=m) == pytest.approx(expected)
    with pytest.raises(ParameterError, match=r"^alpha must be >= 2, got 1$"):
        ddg_rdp(1, l2=1.0, l1=1.0, sigma=1.0, tau=0.0, dim=1)


def test_calibration_meets_epsilon_and_is_within_ten_percent_of_proxy_noise_at_t_equal_l():
    cal = calibrate_distributed(epsilon=1.0, delta=1e-5, d=64, frac_bits=16, owners=10, honest=10)
    eps = cal.epsilon_for(10)
    assert 0.99 < eps <= 1.0
    proxy = calibrate_add_remove(epsilon=1.0, delta=1e-5, d=64, frac_bits=16)
    for b in ("R", "v", "N"):
        assert 1.0 < cal.sigma(b, 10) / proxy.sigma(b) < 1.1


def test_dropout_sizing_and_coalitions():
    cal = calibrate_distributed(epsilon=1.0, delta=1e-5, d=8, frac_bits=10, owners=10, honest=6, quorum=8)
    assert cal.n_sized == 4
    assert cal.epsilon_for(4) <= 1.0
    from dpdpca.protocol.add_remove import coalition_report  # the parties' view of the dp calibration

    report = coalition_report(cal, present=10)
    eps = {k: v["epsilon"] for k, v in report.items()}
    assert eps["proxy"] == 0.0
    assert eps["user"] == eps["proxy+user"] < eps["proxy+user+4 owners"] < 1.0
    assert report["proxy+user+4 owners"]["honest_noise_shares"] == 6
    # fewer owners present: a weaker guarantee, still within the target at the quorum
    assert cal.report(present=8).epsilon == pytest.approx(cal.epsilon_for(4))
    assert cal.report(present=9).epsilon < cal.report(present=8).epsilon <= 1.0
    with pytest.raises(ParameterError, match=r"^quorum must be > L - t = 4"):
        calibrate_distributed(epsilon=1.0, delta=1e-5, d=8, frac_bits=10, owners=10, honest=6, quorum=4)
    with pytest.raises(ParameterError, match=r"^honest_owners must be <= 10, got 11$"):
        calibrate_distributed(epsilon=1.0, delta=1e-5, d=8, frac_bits=10, owners=10, honest=11)


@pytest.mark.slow
def test_sum_of_owner_shares_has_the_convolved_distribution():
    """Five owners' N_Z(0, 2) shares: their sum against the exact convolution (chi-square, p > 1e-4)."""
    n, s2, size = 5, 2, 20000
    total = np.zeros(size, dtype=np.int64)
    rng = np.random.default_rng(11)
    for _ in range(n):
        total += np.array(sample_discrete_gaussian(s2, size, rng), dtype=np.int64)
    ks = np.arange(-30, 31)
    one = np.exp(-ks.astype(float) ** 2 / (2 * s2))
    one /= one.sum()
    pmf = one
    for _ in range(n - 1):
        pmf = np.convolve(pmf, one)
    support = np.arange(-30 * n, 30 * n + 1)
    counts = Counter(total.tolist())
    edges = [-6, -4, -2, -1, 0, 1, 2, 4, 6]
    obs, exp = [], []
    lo = -10 ** 9
    for e in edges + [10 ** 9]:
        mask = (support > lo) & (support <= e)
        exp.append(pmf[mask].sum() * size)
        obs.append(sum(c for k, c in counts.items() if lo < k <= e))
        lo = e
    assert stats.chisquare(obs, exp).pvalue > 1e-4
    assert np.var(total) == pytest.approx(n * s2, rel=0.05)
