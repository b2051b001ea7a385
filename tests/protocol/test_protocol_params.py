"""Public parameters: JSON round trip, tamper checks, the noise allowance and the slot bound."""

from __future__ import annotations

import copy
import math

import pytest

from dpdpca.errors import MessageError, OverflowRiskError, ParameterError
from dpdpca.protocol.params import (PARAMS_KEY, ProtocolParams, check_noise_options, integer_noise_sensitivity,
                                    noise_sigma_int, noise_tail_factor, slot_value_bound,
                                    final_value_bound, carry_value_bound, masked_sum_bound)


@pytest.fixture(scope="module")
def params(keypair) -> ProtocolParams:
    return ProtocolParams.create(keypair[0], release="any", max_owners=5, max_rows_per_owner=100, frac_bits=12,
                                 min_epsilon=0.1, min_delta=1e-9)


def test_json_round_trip_rederives_the_same_layout(params):
    back = ProtocolParams.from_json(params.to_json(), insecure_test_key=True)
    assert back == params and back.layout == params.layout
    assert back.noise_allowance == params.noise_allowance and back.session_id == params.session_id


@pytest.mark.parametrize("field,value", [("slot_bits", 7), ("slots", 99), ("noise_allowance", "5"),
                                         ("version", 2), ("version", 4), ("packing", "plain"),
                                         ("release", "add-remove")])
def test_tampered_public_parameters_are_refused(params, field, value):
    data = copy.deepcopy(params.to_json())
    data[PARAMS_KEY][field] = value
    with pytest.raises(MessageError):
        ProtocolParams.from_json(data, insecure_test_key=True)


@pytest.mark.parametrize("old", [1, 2])
def test_earlier_parameter_versions_ask_for_a_new_keygen(params, old):
    data = copy.deepcopy(params.to_json())
    data[PARAMS_KEY]["version"] = old
    with pytest.raises(MessageError, match=f"version must be 3 .*run dpdpca keygen again.*got {old}"):
        ProtocolParams.from_json(data, insecure_test_key=True)
    data[PARAMS_KEY]["version"] = 3
    data[PARAMS_KEY]["release"] = "both"
    with pytest.raises(ParameterError, match=r"^release must be one of \('any', 'add-remove', 'centred'\), got 'both'$"):
        ProtocolParams.from_json(data, insecure_test_key=True)


def test_missing_protocol_fields_are_refused(params):
    data = copy.deepcopy(params.to_json())
    del data[PARAMS_KEY]["kappa"]
    with pytest.raises(MessageError, match="every protocol field"):
        ProtocolParams.from_json(data, insecure_test_key=True)
    with pytest.raises(MessageError, match=PARAMS_KEY):
        ProtocolParams.from_json(params.public_key.to_json())


def test_layout_holds_the_largest_slot_value(params, keypair):
    declared = dict(owners=5, rows_per_owner=100, frac_bits=12, kappa=40, noise_bound=params.noise_allowance)
    # wide (default): final values within max_abs, intermediates within the carry bound
    assert params.packing == "wide" and params.layout.carries
    assert params.layout.max_abs >= final_value_bound(**declared) == params.final_bound
    assert params.layout.limit >= carry_value_bound(**declared) >= slot_value_bound(d=1, **declared)
    params.layout.check_key(params.public_key)
    # plain: every slot holds R'' itself
    plain = ProtocolParams.create(keypair[0], release="any", max_owners=5, max_rows_per_owner=100, frac_bits=12, min_epsilon=0.1,
                                  min_delta=1e-9, packing="plain")
    assert not plain.layout.carries and plain.layout.max_abs >= slot_value_bound(d=1, **declared)
    assert plain.layout.slots * plain.layout.slot_bits <= plain.public_key.bits - 2
    assert params.layout.slots > plain.layout.slots  # 11 vs 6 at 768 bits; ~2x at 2048
    assert ProtocolParams.from_json(plain.to_json(), insecure_test_key=True).layout == plain.layout
    with pytest.raises(ParameterError, match="packing must be one of"):
        ProtocolParams.create(keypair[0], release="any", max_owners=5, max_rows_per_owner=100, packing="narrow")


def test_v_prime_has_its_own_layout_and_m_its_own_slot_width(params, keypair):
    declared = dict(owners=5, rows_per_owner=100, frac_bits=12, kappa=40)
    vb = masked_sum_bound(**declared)
    assert vb == (500 << 12) * (2 ** 40 + 1)
    v2 = params.v2_layout
    assert not v2.carries and v2.max_abs >= vb and v2 == v2.for_bound(params.public_key, vb)
    # M's slots are narrower than v' needs: sharing one layout would cost M slots
    assert params.layout.max_abs < vb and params.layout.slot_bits < v2.slot_bits
    # the add/remove release's noisy blocks (each owner's share with its noise, plus the proxy's) fit M's slots
    a = params.noise_allowance
    shares = params.share_bounds("add-remove")
    assert 5 * max(shares["R"], shares["v"]) + a <= params.final_bound <= params.layout.max_abs
    plain = ProtocolParams.create(keypair[0], release="any", max_owners=5, max_rows_per_owner=100, frac_bits=12, min_epsilon=0.1,
                                  min_delta=1e-9, packing="plain")
    assert plain.v2_layout == plain.layout


def test_noise_allowance_covers_every_option_at_the_declared_minimum_budget(params):
    t = noise_tail_factor()
    assert 2 * math.exp(-t * t / 2) * 2 ** 40 < 2 ** -80
    for lattice in ("n-scaled", "integer"):
        for mode in ("rigorous", "paper"):
            for calibration in ("analytic", "classic"):
                sigma = noise_sigma_int(500, epsilon=0.1, delta=1e-9, frac_bits=12, sensitivity_mode=mode,
                                        noise_lattice=lattice, calibration=calibration)
                assert t * sigma < params.noise_allowance
    with pytest.raises(OverflowRiskError, match="got 0.01"):
        params.check_noise_fits(noise_sigma_int(500, epsilon=0.01, delta=1e-9, frac_bits=12), epsilon=0.01)


def test_declared_bounds_have_documented_maxima(keypair, params):
    """kappa <= 256 and d <= 65536, checked without a key (DataUser.generate checks before the prime search) and
    in public.json; a huge bound in a layout's error message is shortened (a 5000-digit int has no str)."""
    from dpdpca.crypto import SlotLayout
    from dpdpca.protocol.params import MAX_FEATURES, MAX_KAPPA

    assert (MAX_KAPPA, MAX_FEATURES) == (256, 65536)
    declared = dict(max_owners=5, max_rows_per_owner=100)
    with pytest.raises(ParameterError, match="^kappa must be <= 256, got 9999$"):
        ProtocolParams.check_declared(**declared, kappa=9999)
    with pytest.raises(ParameterError, match="^d must be <= 65536, got 65537$"):
        ProtocolParams.create(keypair[0], **declared, d=MAX_FEATURES + 1)
    with pytest.raises(ParameterError, match="^min_epsilon must be in"):
        ProtocolParams.check_declared(**declared, min_epsilon=1e300)
    data = params.to_json()
    data[PARAMS_KEY]["d"] = 10 ** 9
    with pytest.raises(MessageError, match=f"^{PARAMS_KEY}.d must be <= 65536, got 1000000000$"):
        ProtocolParams.from_json(data, insecure_test_key=True)
    with pytest.raises(OverflowRiskError, match="final_abs .* an integer of about 5001 digits$"):
        SlotLayout.for_final_bound(keypair[0], 10 ** 5000, 0)


def test_integer_sensitivity_is_the_exact_ceiling():
    assert integer_noise_sensitivity(10, frac_bits=16) == (3.6, 36 * 2 ** 32)  # N * 4(N-1)/N * 2^(2f)
    assert integer_noise_sensitivity(10, frac_bits=16, noise_lattice="integer") == (3.6, math.ceil(3.6 * 2 ** 32))
    assert integer_noise_sensitivity(7, frac_bits=0, sensitivity_mode="paper") == (1.0, 7)
    assert integer_noise_sensitivity(1, frac_bits=16) == (0.0, 1)  # N = 1: S-bar = 0, calibrate to 1


def test_noise_options_are_validated():
    assert check_noise_options(epsilon=1, delta=0.5, calibration="classic", sensitivity_mode="paper",
                               noise_lattice="integer") == (1.0, 0.5)
    with pytest.raises(ParameterError, match="calibration must be one of"):
        check_noise_options(epsilon=1, delta=0.5, calibration="x", sensitivity_mode="paper", noise_lattice="integer")
    with pytest.raises(ParameterError, match="neighbouring"):
        check_noise_options(epsilon=1, delta=0.5, calibration="analytic", sensitivity_mode="paper",
                            noise_lattice="integer", neighbouring="add/remove-one")


@pytest.mark.parametrize("release", ["centred", "add-remove"])
@pytest.mark.parametrize("d,slots", [(1, 1), (2, 5), (7, 3), (64, 31), (100, 30)])
def test_share_counts_are_the_lengths_of_share_chunks(release, d, slots):
    from dpdpca.protocol.releases import as_release

    rel = as_release(release)
    chunks = rel.share_chunks(d, slots)
    assert rel.share_counts(d, slots) == {name: len(c) for name, c in chunks.items()}
    assert list(rel.share_counts(d, slots)) == list(chunks) == list(rel.sections)  # the signed digest's order


@pytest.mark.parametrize("d,slots", [(1, 1), (2, 5), (7, 3), (64, 41), (100, 30)])
def test_add_remove_r_is_dense_and_centred_r_is_row_aligned(d, slots):
    from dpdpca.crypto import triangle_size
    from dpdpca.protocol.layout import row_chunk_spans
    from dpdpca.protocol.releases import ADD_REMOVE, CENTRED

    dense = ADD_REMOVE.share_chunks(d, slots)["R"]
    t = triangle_size(d)
    assert sum(dense) == t and len(dense) == -(-t // slots)
    assert all(c == slots for c in dense[:-1]) and 1 <= dense[-1] <= slots
    aligned = CENTRED.share_chunks(d, slots)["R"]
    assert sum(aligned) == t and [s[2] for s in row_chunk_spans(d, slots)] == aligned
    assert ADD_REMOVE.result_ciphertexts(d, slots) == len(dense) + -(-d // slots) + 1
    if d == 64:  # the figure the layout module's docstring quotes
        assert (len(dense), len(aligned)) == (51, 87)



@pytest.mark.parametrize("epsilon", [pytest.param(0.01, marks=pytest.mark.slow),
                                     pytest.param(0.1, marks=pytest.mark.slow), 1.0])
@pytest.mark.parametrize("delta", [pytest.param(1e-12, marks=pytest.mark.slow), 1e-5, 0.1])
def test_add_remove_sigma_bound_covers_each_owners_distributed_sigma_up_to_epsilon_1(epsilon, delta):
    # dpdpca run sizes the allowance at min(epsilon, 1) (RunPlan.param_kwargs): this is why that is enough.
    from dpdpca.dp import calibrate_distributed
    from dpdpca.protocol.params import add_remove_sigma_bound

    # Each owner's share of the noise is largest with one honest owner (it then carries all of it) and grows
    # with d (the budget split), so d = 64 and 784 with t = 1 are the binding cases; t = L = 2 checks the split
    # path (t = L = 100 gives a tenth of the t = 1 sigma and took most of this test's time).
    bound = add_remove_sigma_bound(frac_bits=16, min_epsilon=epsilon, min_delta=delta)
    for d in (64, 784):
        for owners, honest in ((2, 1), (2, 2), (10, 1), (100, 1)):
            cal = calibrate_distributed(epsilon=epsilon, delta=delta, d=d, frac_bits=16, owners=owners,
                                        honest=honest, quorum=None)
            local = max(math.sqrt(float(s2)) for s2 in cal.local_sigma_squared_int.values())
            assert local < 0.7 * bound
