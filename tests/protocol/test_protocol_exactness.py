"""(S-bar + G') - G' == S-bar exactly, and the privacy/noise bookkeeping around it."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpdpca.crypto import local_process_pool
from dpdpca.protocol import run_protocol
from dpdpca.protocol.params import noise_sigma_int, noise_tail_factor
from dpdpca.protocol.runner import reference_scatter_int


def _partitions(draw_d: int):
    part = arrays(np.float64, st.tuples(st.integers(1, 7), st.just(draw_d)),
                  elements=st.floats(-0.6, 0.6, allow_nan=False, allow_subnormal=False))
    # at least two rows in total: one row has a centred scatter of 0 and is refused before encrypting
    return st.lists(part, min_size=1, max_size=4).filter(lambda ps: sum(p.shape[0] for p in ps) >= 2)


partitions_strategy = st.integers(1, 5).flatmap(_partitions)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(partitions_strategy, st.sampled_from(["n-scaled", "integer"]))
def test_user_result_minus_noise_is_the_exact_centred_scatter(make_user, parts, lattice):
    """Hypothesis partitions: negative values, uneven N^l, L = 1 ... 4."""
    user = make_user(max_owners=4, max_rows_per_owner=8)
    run = run_protocol(parts, release="centred", n_components=1, epsilon=1.0, delta=1e-5, noise_lattice=lattice, user=user,
                       verify=True, key_bits=user.params.public_key.bits, insecure_test_key=True)
    assert run.verify == {"max_abs_integer_error": 0}
    # The same identity over the rationals, as the user sees it: (S_bar + G') - G' == S_bar.
    ref = reference_scatter_int(parts, frac_bits=16, clip=True)
    n = sum(p.shape[0] for p in parts)
    scale = n << 32
    assert run.scale == scale
    d = ref.shape[0]
    k = 0
    noise = run.noise_for_testing
    for i in range(d):
        for j in range(i, d):
            s_plus_g = Fraction(int(run.noisy_scatter_int[i, j]), scale)
            g = Fraction(noise[k], scale)
            assert s_plus_g - g == Fraction(int(ref[i, j]), scale)
            k += 1


def test_identity_holds_for_two_equal_rows_and_a_single_owner(make_user):
    user = make_user(max_owners=1, max_rows_per_owner=2)
    run = run_protocol([np.array([[-0.5, 0.25, 0.0]] * 2)], release="centred", n_components=1, user=user, verify=True,
                       key_bits=768, insecure_test_key=True)
    assert run.verify["max_abs_integer_error"] == 0
    # Two equal rows: S_bar = 0, so the user's matrix is pure noise.
    assert [int(run.noisy_scatter_int[i, j]) for i in range(3) for j in range(i, 3)] == run.noise_for_testing


def test_a_single_row_is_refused_before_anyone_encrypts(make_user):
    from dpdpca.errors import DataError

    user = make_user(max_owners=1, max_rows_per_owner=1)
    with pytest.raises(DataError, match="rows in total must be >= 2"):
        run_protocol([np.array([[-0.5, 0.25, 0.0]])], release="centred", n_components=1, user=user, key_bits=768,
                     insecure_test_key=True)
    assert "decrypt" not in user.timings_.to_dict()["parties"].get("user", {})


def test_noise_has_the_reported_sigma_and_stays_inside_the_allowance(make_user, unit_rows):
    rng = np.random.default_rng(3)
    parts = [unit_rows(rng, 40, 12) for _ in range(3)]
    user = make_user(max_owners=3, max_rows_per_owner=40)
    run = run_protocol(parts, release="centred", n_components=2, epsilon=0.5, delta=1e-6, user=user, verify=True,
                       key_bits=768, insecure_test_key=True)
    n = 120
    sigma_int = noise_sigma_int(n, epsilon=0.5, delta=1e-6, frac_bits=16)
    noise = np.array(run.noise_for_testing, dtype=float)
    # 78 draws: the sample std is within 30% of sigma with overwhelming probability.
    assert 0.7 < noise.std() / sigma_int < 1.3
    assert np.abs(noise).max() < noise_tail_factor() * sigma_int <= user.params.noise_allowance
    p = run.result.privacy
    # the rounding-coupling calibration: 6-10% below the zCDP sigma the allowance is sized for
    assert 0.9 * sigma_int / (n << 32) < p.sigma < sigma_int / (n << 32)
    assert p.sensitivity == pytest.approx(4 * (n - 1) / n)
    assert p.neighbouring == "replace-one" and p.noise_added_by == "proxy"
    assert 1e-6 < p.delta < 1e-6 * (1 + 1e-6)  # the mask's TV term is added, and tiny
    assert "total-variation" in p.notes


def test_paper_sensitivity_mode_reports_delta_one(make_user, unit_rows):
    rng = np.random.default_rng(4)
    parts = [unit_rows(rng, 10, 3) for _ in range(2)]
    run = run_protocol(parts, release="centred", n_components=1, sensitivity_mode="paper", calibration="classic", epsilon=0.5,
                       user=make_user(), key_bits=768, insecure_test_key=True)
    assert run.result.privacy.sensitivity == 1.0
    assert run.result.privacy.sensitivity_mode == "paper"
    assert run.result.privacy.calibration == "classic"


def test_integer_lattice_leaks_v_v_mod_n_and_n_scaled_does_not(make_user, unit_rows):
    """Why the rigorous default differs from the paper's form: with N*G' the user learns v_i v_j mod N."""
    rng = np.random.default_rng(5)
    parts = [unit_rows(rng, 9, 3), unit_rows(rng, 8, 3)]  # N = 17
    leak = run_protocol(parts, release="centred", n_components=1, noise_lattice="integer", user=make_user(), key_bits=768,
                        insecure_test_key=True)
    safe = run_protocol(parts, release="centred", n_components=1, noise_lattice="n-scaled", user=make_user(), key_bits=768,
                        insecure_test_key=True)
    ref = reference_scatter_int(parts, frac_bits=16, clip=True)
    n = 17
    # reference N*R - v v^T == -v v^T (mod N): the integer lattice reveals it exactly
    assert all(int(leak.noisy_scatter_int[i, j]) % n == int(ref[i, j]) % n for i in range(3) for j in range(3))
    assert "NOT differentially private" in leak.result.privacy.notes
    assert leak.result.privacy.epsilon == float("inf") and safe.result.privacy.epsilon == 1.0
    matches = sum(int(safe.noisy_scatter_int[i, j]) % n == int(ref[i, j]) % n for i in range(3) for j in range(i, 3))
    assert matches < 6  # 6 entries each match with prob. ~1/17


def _exact_run(make_user, unit_rows, d, packing, rows=4, owners=2, executor=None):
    rng = np.random.default_rng(d)
    parts = [unit_rows(rng, rows, d) for _ in range(owners)]
    user = make_user(max_owners=owners, max_rows_per_owner=rows, packing=packing)
    run = run_protocol(parts, n_components=1, user=user, verify=True, key_bits=768, insecure_test_key=True,
                       executor=executor)
    assert run.verify == {"max_abs_integer_error": 0}
    return user, run


@pytest.mark.parametrize("packing", ["wide", "plain"])
@pytest.mark.parametrize("d", [1, 2, 64])
def test_both_packings_are_exact(make_user, unit_rows, d, packing):
    user, run = _exact_run(make_user, unit_rows, d, packing)
    layout = user.params.layout
    assert run.result.params["slots"] == layout.slots and layout.carries == (packing == "wide")


@pytest.mark.slow
def test_wide_packing_is_exact_at_a_large_d_on_a_process_pool(make_user, unit_rows):
    """32 896 triangle entries in thousands of ciphertexts per owner, two local processes sharing the work: the
    carries and the pool's chunks are those of any larger d (d = 784 took minutes of a loaded machine and
    proved nothing more: the slot layout does not depend on d)."""
    with local_process_pool(2) as pool:
        user, _ = _exact_run(make_user, unit_rows, 256, "wide", rows=2, executor=pool)
    assert user.params.layout.carries
