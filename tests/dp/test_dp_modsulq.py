"""FPCA's MOD-SuLQ noise levels (Grammenos et al. 2020, eqs. (6), (8), Lemma 2)."""

from __future__ import annotations

import math

import pytest

from dpdpca.dp import modsulq_min_batch, modsulq_omega, streaming_modsulq_omega
from dpdpca.errors import ParameterError


def test_eq_6_by_hand():
    eps, delta, d, n = 0.1, 0.1, 20, 5000
    expected = (21 / (n * eps)) * math.sqrt(2 * math.log(420 / (2 * delta * math.sqrt(2 * math.pi)))) \
        + 1 / (n * math.sqrt(eps))
    assert modsulq_omega(eps, delta, d, n) == pytest.approx(expected, rel=1e-14)


def test_eq_8_by_hand_and_scaling():
    eps, delta, d = 0.5, 0.05, 20
    k = 4 * d / eps * math.sqrt(2 * math.log(d * d / (delta * math.sqrt(2 * math.pi)))) + math.sqrt(2 / eps)
    assert streaming_modsulq_omega(eps, delta, d, 25) == pytest.approx(k / 25, rel=1e-14)
    assert streaming_modsulq_omega(eps, delta, d, 50) == pytest.approx(k / 50, rel=1e-14)
    # the streaming (non-symmetric) mask needs more noise than the symmetric one
    assert streaming_modsulq_omega(eps, delta, d, 25) > modsulq_omega(eps, delta, d, 25)


@pytest.mark.parametrize("omega0", [0.01, 0.5, 3.0])
def test_lemma_2_minimum_batch(omega0):
    eps, delta, d = 1.0, 0.01, 10
    t = modsulq_min_batch(eps, delta, d, omega0)
    assert isinstance(t, int)
    assert streaming_modsulq_omega(eps, delta, d, t) <= omega0
    if t > 1:
        assert streaming_modsulq_omega(eps, delta, d, t - 1) > omega0
    printed = modsulq_min_batch(eps, delta, d, omega0, mode="paper")
    k = streaming_modsulq_omega(eps, delta, d, 1)
    assert printed == pytest.approx(1 / (omega0 * k))  # the printed formula, dimensionally wrong


@pytest.mark.parametrize("call,match", [
    (lambda: modsulq_omega(0, 0.1, 3, 10), r"^epsilon must be > 0, got 0$"),
    (lambda: modsulq_omega(1, 1.0, 3, 10), r"^delta must be in \(0, 1\), got 1.0$"),
    (lambda: modsulq_omega(1, 0.1, 0, 10), r"^d must be >= 1, got 0$"),
    (lambda: modsulq_omega(1, 0.1, 3, 0), r"^n must be >= 1, got 0$"),
    (lambda: modsulq_omega(1, 0.9, 1, 10), r"^delta must be < \(d\^2\+d\)/\(2 sqrt\(2 pi\)\) = 0.3989 for eq. \(6\) to be defined, got 0.9$"),
    (lambda: streaming_modsulq_omega(1, 0.9, 1, 10), r"^delta must be < d\^2/sqrt\(2 pi\) = 0.3989 for eq. \(8\) to be defined, got 0.9$"),
    (lambda: modsulq_min_batch(1, 0.1, 3, 0.0), r"^omega0 must be > 0, got 0.0$"),
    (lambda: modsulq_min_batch(1, 0.1, 3, 1.0, mode="x"), r"^mode must be 'rigorous' or 'paper', got 'x'$"),
])
def test_modsulq_validation(call, match):
    with pytest.raises(ParameterError, match=match):
        call()


def test_modsulq_mechanism_sigmas_reports_and_the_gaussian_check():
    import numpy as np
    from scipy import stats

    from dp_stats import P_MIN
    from dpdpca.dp import GeneratorNoiseSource, calibrate_gaussian
    from dpdpca.dp.modsulq import ModSulqMechanism

    eps, delta, d, n = 0.5, 0.05, 30, 400
    sym = ModSulqMechanism(epsilon=eps, delta=delta, d=d, n=n, mask="symmetric")
    stream = ModSulqMechanism(epsilon=eps, delta=delta, d=d, n=n)
    ana = ModSulqMechanism(epsilon=eps, delta=delta, d=d, n=n, calibration="analytic")
    assert sym.sigma == modsulq_omega(eps, delta, d, n) and stream.sigma == streaming_modsulq_omega(eps, delta, d, n)
    assert ana.sigma == calibrate_gaussian(epsilon=eps, delta=delta, sensitivity=math.sqrt(2) / n)
    for m in (sym, stream):  # eq. (6)/(8) dominate the analytic Gaussian sigma: (eps, delta) holds by Balle-Wang too
        assert m.sigma > m.analytic_sigma and m.achieved_delta == delta
        rep = m.privacy("curator")
        assert rep.sigma == m.sigma and rep.sensitivity == pytest.approx(math.sqrt(2) / n)
        assert rep.epsilon == eps and rep.delta == delta and rep.neighbouring == "replace-one"
    src = GeneratorNoiseSource(np.random.default_rng(0))
    g = sym.sample_symmetric(src)
    assert np.array_equal(g, g.T)
    upper = g[np.triu_indices(d)]
    blocks = np.concatenate([stream.sample_block(7, src).ravel() for _ in range(60)])
    for z, omega in ((upper, sym.sigma), (blocks, stream.sigma)):
        stat = float(np.sum((z / omega) ** 2))
        assert 2 * min(stats.chi2.cdf(stat, z.size), stats.chi2.sf(stat, z.size)) > P_MIN
        assert stats.kstest(z / omega, "norm").pvalue > P_MIN
    with pytest.raises(ParameterError, match=r"^mask must be 'streaming' or 'symmetric', got 'x'$"):
        ModSulqMechanism(epsilon=1, delta=0.1, d=3, n=10, mask="x")
    with pytest.raises(ParameterError, match=r"^calibration must be one of 'modsulq', 'analytic', 'classic', got 'x'$"):
        ModSulqMechanism(epsilon=1, delta=0.1, d=3, n=10, calibration="x")
    # the classic Gaussian is a calibration the comparison can claim, so it runs (same sensitivity, larger sigma)
    classic = ModSulqMechanism(epsilon=1, delta=0.1, d=3, n=10, calibration="classic")
    analytic = ModSulqMechanism(epsilon=1, delta=0.1, d=3, n=10, calibration="analytic")
    assert classic.calibration == "classic" and classic.sigma > analytic.sigma
