"""Sensitivities: searched adversarially on real neighbouring datasets; paper values shown to fall short."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dp_errors import error_for
from scipy import optimize

from dpdpca.dp import (
    ADD_REMOVE_ONE,
    REPLACE_ONE,
    centred_scatter_sensitivity,
    entries_from_symmetric_tensor,
    quadratic_sketch_sensitivity,
    scatter_sensitivity,
    second_moment_sensitivity,
    tensor_moment_sensitivity,
    upper_from_symmetric,
)


def _clip(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v)
    return v if n <= 1 else v / n


def _centred_scatter(X: np.ndarray) -> np.ndarray:
    v = X.sum(axis=0)
    return X.T @ X - np.outer(v, v) / X.shape[0]


def _centred_gap(X: np.ndarray, x_new: np.ndarray) -> float:
    Xp = X.copy()
    Xp[-1] = x_new
    return float(np.linalg.norm(_centred_scatter(X) - _centred_scatter(Xp)))


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 3, 10])
def test_centred_scatter_bound_is_never_exceeded_by_adversarial_search(n):
    """Maximise ||S(X) - S(X')||_F over whole datasets (all rows free, clipped to the ball)."""
    rng = np.random.default_rng(n)
    d = 3
    bound = centred_scatter_sensitivity(n)
    assert bound == 4 * (n - 1) / n

    def neg_gap(z: np.ndarray) -> float:
        rows = np.array([_clip(r) for r in z[: n * d].reshape(n, d)])
        return -_centred_gap(rows, _clip(z[n * d:]))

    best = 0.0
    for _ in range(25):
        res = optimize.minimize(neg_gap, rng.normal(size=(n + 1) * d), method="Nelder-Mead",
                                options={"maxiter": 3000, "xatol": 1e-9, "fatol": 1e-12})
        best = max(best, -res.fun)
    for _ in range(2000):  # plain random neighbours, including points on the sphere
        X = np.array([_clip(r) for r in rng.normal(size=(n, d)) * rng.uniform(0.2, 2)])
        best = max(best, _centred_gap(X, _clip(rng.normal(size=d) * 3)))
    assert best <= bound * (1 + 1e-9)
    assert best >= 0.99 * bound  # the search does reach the bound: it is tight


def test_centred_scatter_tight_example_and_paper_value_exceeded():
    n = 7
    m = np.array([1.0, 0.0, 0.0])
    X = np.tile(m, (n, 1))
    X[-1] = -m
    gap = _centred_gap(X, m)
    assert gap == pytest.approx(4 * (n - 1) / n, rel=1e-12)
    assert gap > centred_scatter_sensitivity(n, mode="paper") == 1.0
    # the upper-triangle L2 norm (what i.i.d. upper-triangle noise needs) is also 4(n-1)/n here
    Xp = X.copy()
    Xp[-1] = m
    diff = _centred_scatter(X) - _centred_scatter(Xp)
    assert np.linalg.norm(upper_from_symmetric(diff)) == pytest.approx(4 * (n - 1) / n, rel=1e-12)


def test_centred_scatter_exact_and_relations():
    assert centred_scatter_sensitivity(10, exact=True) == Fraction(36, 10)
    assert centred_scatter_sensitivity(1) == 0.0
    assert centred_scatter_sensitivity(10, neighbouring=ADD_REMOVE_ONE) == 4.0
    assert centred_scatter_sensitivity(10, mode="paper", exact=True) == Fraction(1)
    # add/remove: adding a record changes S by (n/(n+1)) (x - m)(x - m)^T, below 4
    rng = np.random.default_rng(0)
    for _ in range(500):
        X = np.array([_clip(r) for r in rng.normal(size=(5, 3))])
        x = _clip(rng.normal(size=3) * 5)
        gap = np.linalg.norm(_centred_scatter(np.vstack([X, x])) - _centred_scatter(X))
        assert gap <= 4.0


def test_second_moment_and_scatter_replace_one_need_sqrt2():
    n = 5
    X = np.zeros((n, 4))
    X[:, 0] = 1.0
    Xp = X.copy()
    Xp[-1] = [0, 1, 0, 0]
    gap = np.linalg.norm(X.T @ X / n - Xp.T @ Xp / n)
    assert gap == pytest.approx(second_moment_sensitivity(n), rel=1e-12) == math.sqrt(2) / n
    assert gap > second_moment_sensitivity(n, mode="paper")
    assert np.linalg.norm(X.T @ X - Xp.T @ Xp) == pytest.approx(scatter_sensitivity())
    assert scatter_sensitivity(mode="paper") == 1.0 < math.sqrt(2)
    assert scatter_sensitivity(neighbouring=ADD_REMOVE_ONE) == 1.0
    assert second_moment_sensitivity(n, neighbouring=ADD_REMOVE_ONE) == 1 / n
    rng = np.random.default_rng(1)
    for _ in range(2000):
        x, xp = _clip(rng.normal(size=4) * 2), _clip(rng.normal(size=4) * 2)
        assert np.linalg.norm(np.outer(x, x) - np.outer(xp, xp)) <= math.sqrt(2) * (1 + 1e-12)


def test_tensor_moment_sensitivities():
    n, d, s2 = 50, 6, 0.3
    rng = np.random.default_rng(2)
    rig = tensor_moment_sensitivity(n, model="mog", order=3, dimension=d, noise_variance=s2)
    assert rig == pytest.approx((2 + 2 * math.sqrt(d + 8) * s2) / n)
    frob = tensor_moment_sensitivity(n, model="mog", order=3, dimension=d, noise_variance=s2, coordinates="frobenius")
    assert frob == pytest.approx((2 + 2 * math.sqrt(3 * d + 6) * s2) / n)
    assert tensor_moment_sensitivity(n, model="mog", order=3, dimension=d, noise_variance=s2, mode="paper") == \
        pytest.approx((2 + 6 * d * s2) / n)
    eye = np.eye(d)

    def m3_term(t: np.ndarray) -> np.ndarray:
        corr = sum(np.einsum("i,j,k->ijk", t, e, e) + np.einsum("i,j,k->ijk", e, t, e)
                   + np.einsum("i,j,k->ijk", e, e, t) for e in eye)
        return (np.einsum("i,j,k->ijk", t, t, t) - s2 * corr) / n

    worst = worst_distinct = 0.0
    for _ in range(300):
        t = _clip(rng.normal(size=d) * 2)
        tp = -t if rng.random() < 0.3 else _clip(rng.normal(size=d) * 2)
        change = m3_term(t) - m3_term(tp)
        worst = max(worst, np.linalg.norm(change))
        worst_distinct = max(worst_distinct, np.linalg.norm(entries_from_symmetric_tensor(change)))
    assert worst <= frob
    assert worst_distinct <= rig < frob
    # the correction term's norms are exact identities: sqrt(D+8) ||u|| (distinct), sqrt(3D+6) ||u|| (all)
    u = rng.normal(size=d)
    corr = sum(np.einsum("i,j,k->ijk", u, e, e) + np.einsum("i,j,k->ijk", e, u, e)
               + np.einsum("i,j,k->ijk", e, e, u) for e in eye)
    assert np.linalg.norm(entries_from_symmetric_tensor(corr)) == pytest.approx(math.sqrt(d + 8) * np.linalg.norm(u))
    assert np.linalg.norm(corr) == pytest.approx(math.sqrt(3 * d + 6) * np.linalg.norm(u))
    # MOG M2: the paper's spectral-norm 1/N is exceeded in Frobenius norm by orthogonal records
    assert tensor_moment_sensitivity(n, model="mog", order=2, mode="paper") == 1 / n
    e1, e2 = eye[0], eye[1]
    assert np.linalg.norm(np.outer(e1, e1) - np.outer(e2, e2)) / n > 1 / n
    assert tensor_moment_sensitivity(n, model="mog", order=2) == pytest.approx(math.sqrt(2) / n)
    assert tensor_moment_sensitivity(n, model="stm", order=3) == pytest.approx(math.sqrt(2) / n)


def test_quadratic_sketch_bounds_hold_on_random_records():
    rng = np.random.default_rng(3)
    omega = rng.normal(size=(5, 40))
    l1 = quadratic_sketch_sensitivity(omega, norm="l1")
    l2 = quadratic_sketch_sensitivity(omega, norm="l2")
    l1_rep = quadratic_sketch_sensitivity(omega, norm="l1", neighbouring=REPLACE_ONE)
    l2_rep = quadratic_sketch_sensitivity(omega, norm="l2", neighbouring=REPLACE_ONE)
    assert l1 == pytest.approx(np.linalg.norm(omega, 2) ** 2) and l1_rep == 2 * l1
    assert l2_rep == pytest.approx(math.sqrt(2) * l2)  # non-negative features: ||a-b||^2 <= ||a||^2 + ||b||^2
    assert l2 <= quadratic_sketch_sensitivity(omega, norm="l2", mode="paper")
    for _ in range(3000):
        x, xp = _clip(rng.normal(size=5) * 2), _clip(rng.normal(size=5) * 2)
        u, up = (omega.T @ x) ** 2, (omega.T @ xp) ** 2
        assert np.abs(u).sum() <= l1 * (1 + 1e-12) and np.linalg.norm(u) <= l2 * (1 + 1e-12)
        assert np.abs(u - up).sum() <= l1_rep * (1 + 1e-12) and np.linalg.norm(u - up) <= l2_rep * (1 + 1e-12)
    # the top singular vector attains the L1 value: it is exact
    top = np.linalg.svd(omega)[0][:, 0]
    assert ((omega.T @ top) ** 2).sum() == pytest.approx(l1)


@pytest.mark.parametrize("call,match", [
    (lambda: second_moment_sensitivity(0), r"^n must be >= 1, got 0$"),
    (lambda: second_moment_sensitivity(3, neighbouring="x"), r"^neighbouring must be one of "),
    (lambda: scatter_sensitivity(mode="tight"), r"^mode must be 'rigorous' or 'paper', got 'tight'$"),
    (lambda: centred_scatter_sensitivity(2.5), r"^n must be an integer, got 2.5$"),
    (lambda: quadratic_sketch_sensitivity(np.zeros(3)), r"^omega must be a finite non-empty 2-D array"),
    (lambda: quadratic_sketch_sensitivity(np.eye(2), norm="linf"), r"^norm must be 'l1' or 'l2', got 'linf'$"),
    (lambda: tensor_moment_sensitivity(5, model="lda", order=2), r"^model must be 'stm' or 'mog', got 'lda'$"),
    (lambda: tensor_moment_sensitivity(5, model="mog", order=2, coordinates="spectral"),
     r"^coordinates must be 'distinct' or 'frobenius', got 'spectral'$"),
    (lambda: tensor_moment_sensitivity(5, model="mog", order=4), r"^order must be <= 3, got 4$"),
    (lambda: tensor_moment_sensitivity(5, model="mog", order=3), r"^dimension must be an integer >= 1"),
    (lambda: tensor_moment_sensitivity(5, model="mog", order=2, neighbouring=ADD_REMOVE_ONE),
     r"^neighbouring must be 'replace-one' for the capeAGN moments"),
    (lambda: tensor_moment_sensitivity(5, model="mog", order=3, dimension=2, noise_variance=-1.0),
     r"^noise_variance must be >= 0, got -1.0$"),
])
def test_sensitivity_validation(call, match):
    with pytest.raises(error_for(match), match=match):
        call()


def test_a_paper_calibrated_report_states_the_delta_at_the_proven_sensitivity():
    from dpdpca.dp import GaussianMechanism, at_proven_sensitivity, gaussian_delta, raise_delta

    rep = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=0.01, calibration="classic",
                            sensitivity_mode="paper").privacy("site", notes="n")
    real = at_proven_sensitivity(rep, math.sqrt(2) * 0.01)
    assert real.delta == pytest.approx(gaussian_delta(1.0, rep.sigma, math.sqrt(2) * 0.01), rel=1e-6)
    assert (real.epsilon, real.sigma, real.sensitivity, real.sensitivity_mode) == (1.0, rep.sigma, 0.01, "paper")
    assert real.notes == ("n; delta 3.736e-05 at epsilon=1 and the statistic's proven L2 sensitivity 0.01414 "
                          "(the delta at the paper's sensitivity 0.01: 1.000e-05)")
    assert at_proven_sensitivity(rep, 0.01) is rep  # no gap: unchanged
    assert raise_delta(rep, 0.5e-5, why="w", claim="c") is rep  # never lowered
