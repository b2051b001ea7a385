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
