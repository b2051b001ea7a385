"""Quadratic-sketch sensitivities (Chatalic et al.) against brute-force maxima on small cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import ortho_group

from dpdpca.dp import ADD_REMOVE_ONE, REPLACE_ONE, quadratic_sketch_sensitivity
from dpdpca.dp.quadratic_sketch import quadratic_sketch_bounds, two_to_four_lower
from dpdpca.errors import ParameterError


def circle(points=20000):
    """Unit vectors of R^2 on a dense grid (half circle suffices: phi(x) = phi(-x))."""
    t = np.linspace(0.0, np.pi, points, endpoint=False)
    return np.stack([np.cos(t), np.sin(t)])


def brute(omega, cols=None):
    """Max over the grid of ||phi||_1 and ||phi||_2 (add/remove-one: the other dataset lacks x)."""
    om = omega if cols is None else omega[:, cols]
    U2 = (om.T @ circle()) ** 2
    return float(U2.sum(axis=0).max()), float(np.sqrt((U2 ** 2).sum(axis=0)).max())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gaussian_frequencies_against_brute_force(seed):
    omega = np.random.default_rng(seed).normal(size=(2, 7))
    b = quadratic_sketch_bounds(omega, neighbouring=ADD_REMOVE_ONE)
    l1_max, l2_max = brute(omega)
    assert b.l1 == pytest.approx(l1_max, rel=1e-6)  # L1 = ||Omega||_2^2 is exact
    # lower <= true <= upper (the grid max is within 1e-8 of the true max, from below)
    assert b.l2_lower <= l2_max * (1 + 1e-7) and l2_max <= b.l2 * (1 + 1e-12)
    assert b.l2_lower == pytest.approx(l2_max, rel=1e-6)  # in d = 2 the ascent finds the maximum


def test_union_of_orthonormal_bases_has_l1_m_over_d_for_every_record():
    omega = np.hstack([ortho_group.rvs(2, random_state=i) for i in range(5)])  # m = 10, d = 2
    b = quadratic_sketch_bounds(omega, neighbouring=ADD_REMOVE_ONE)
    assert b.l1 == pytest.approx(5.0)
    np.testing.assert_allclose(((omega.T @ circle()) ** 2).sum(axis=0), 5.0)  # ||Omega^T x||^2 = m/d ||x||^2
    l2_max = brute(omega)[1]
    assert b.l2_lower == pytest.approx(l2_max, rel=1e-6) and l2_max <= b.l2 <= math.sqrt(5.0) + 1e-12


def test_replace_one_bounds_against_brute_force_pairs():
    rng = np.random.default_rng(3)
    omega = rng.normal(size=(2, 5))
    X = circle(720) * rng.uniform(0, 1, 720)  # records inside the ball, 0 included in spirit
    F = (omega.T @ X) ** 2
    diffs = F[:, :, None] - F[:, None, :]
    l1 = np.abs(diffs).sum(axis=0).max()
    l2 = np.sqrt((diffs ** 2).sum(axis=0)).max()
    b = quadratic_sketch_bounds(omega, neighbouring=REPLACE_ONE)
    assert l1 <= b.l1 * (1 + 1e-12) and l2 <= b.l2 * (1 + 1e-12)
    # tight for Omega = I: x = e_1, x' = e_2 gives exactly 2 and sqrt(2)
    eye = quadratic_sketch_bounds(np.eye(2), neighbouring=REPLACE_ONE)
    assert eye.l1 == pytest.approx(2.0) and eye.l2 == pytest.approx(math.sqrt(2.0))
    assert quadratic_sketch_sensitivity(omega, norm="l2", neighbouring=REPLACE_ONE) == b.l2


def test_subsampled_bounds_against_every_mask():
    rng = np.random.default_rng(4)
    omega = rng.normal(size=(2, 6))
    r = 3
    worst1 = worst2 = 0.0
    for cols in itertools.combinations(range(6), r):
        l1, l2 = brute(omega, list(cols))
        worst1, worst2 = max(worst1, l1), max(worst2, l2)
    b = quadratic_sketch_bounds(omega, features_per_sample=r, neighbouring=ADD_REMOVE_ONE)
    scale = 6 / r  # 1/alpha
    assert scale * worst1 <= b.l1 * (1 + 1e-9) and scale * worst2 <= b.l2 * (1 + 1e-9)
    assert b.l2_lower <= scale * worst2 * (1 + 1e-9)
    blocks = quadratic_sketch_bounds(omega, features_per_sample=r, mask="block", neighbouring=ADD_REMOVE_ONE)
    exact = max(brute(omega, [0, 1, 2])[0], brute(omega, [3, 4, 5])[0])
    assert blocks.l1 == pytest.approx(scale * exact, rel=1e-6)  # block masks: exact


def test_block_masks_over_orthonormal_bases_give_m_over_d():
    omega = np.hstack([ortho_group.rvs(4, random_state=i) for i in range(3)])  # m = 12, d = 4
    b = quadratic_sketch_bounds(omega, features_per_sample=4, mask="block", neighbouring=ADD_REMOVE_ONE)
    assert b.l1 == pytest.approx(3.0) and b.l2 == pytest.approx(3.0) and b.l2_lower == pytest.approx(3.0)


def test_lower_bound_is_attained_by_its_vector():
    omega = np.random.default_rng(5).normal(size=(6, 40))
    value, x = two_to_four_lower(omega)
    assert np.linalg.norm(x) == pytest.approx(1.0)
    assert value == pytest.approx(np.sqrt(np.sum((omega.T @ x) ** 4)))
    assert value <= quadratic_sketch_bounds(omega, neighbouring=ADD_REMOVE_ONE).l2


@pytest.mark.parametrize("call,match", [
    (lambda: quadratic_sketch_bounds(np.eye(2), mask="x"), r"^mask must be 'uniform' or 'block', got 'x'$"),
    (lambda: quadratic_sketch_bounds(np.eye(3), features_per_sample=2, mask="block"),
     r"^features_per_sample must be a divisor of m=3 for block masks, got 2$"),
    (lambda: quadratic_sketch_bounds(np.eye(3), features_per_sample=4),
     r"^features_per_sample must be <= 3, got 4$"),
])
def test_quadratic_sketch_bound_errors(call, match):
    with pytest.raises(ParameterError, match=match):
        call()
