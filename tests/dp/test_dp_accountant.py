"""The RDP/zCDP accountant and ledger, checked against Google's dp-accounting."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

from dpdpca.dp import (
    ADD_REMOVE_ONE,
    ORDERS,
    REPLACE_ONE,
    BudgetExceededError,
    PrivacyLedger,
    ReleaseCost,
    calibrate_distributed,
    rdp_to_delta,
    rdp_to_epsilon,
)
from dpdpca.dp.accountant import compose
from dpdpca.errors import ParameterError


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conversion_matches_dp_accounting(seed):
    rng = np.random.default_rng(seed)
    rdp = np.sort(rng.uniform(0.001, 0.5, len(ORDERS))) * np.array(ORDERS) / 10
    for delta in (1e-5, 1e-8):
        ours = rdp_to_epsilon(ORDERS, list(rdp), delta)
        theirs = rdp_lib.compute_epsilon(ORDERS, list(rdp), delta)
        assert ours[0] == pytest.approx(theirs[0], rel=1e-12)
        assert ours[1] == theirs[1]
        assert rdp_to_delta(ORDERS, list(rdp), ours[0]) == pytest.approx(delta, rel=1e-6)


@pytest.mark.parametrize("sigma,count", [(1.0, 1), (2.5, 7), (10.0, 50), (40.0, 400)])
def test_composed_gaussians_match_dp_accounting(sigma, count):
    acc = rdp_lib.RdpAccountant(orders=list(ORDERS), neighboring_relation=rdp_lib.NeighborRel.ADD_OR_REMOVE_ONE)
    acc.compose(dp_event.GaussianDpEvent(sigma), count)
    theirs = acc.get_epsilon(1e-5)
    cost = ReleaseCost.from_zcdp(1 / (2 * sigma ** 2), epsilon=1e9, delta=0.5, neighbouring=ADD_REMOVE_ONE)
    ours = compose([cost] * count, 1e-5)
    assert ours["rdp"]["epsilon"] == pytest.approx(theirs, rel=1e-9)
    assert ours["method"] == "rdp"


def test_distributed_noise_cost_at_tau_zero_matches_dp_accounting_gaussian():
    cal = calibrate_distributed(epsilon=1.0, delta=1e-5, d=4, frac_bits=10, owners=3, honest=3)
    cost = cal.cost(3)
    # with tau ~ 0 the curve is that of one Gaussian of whitened noise multiplier 1/D
    d2 = sum(float(cal.sigma(b, 3)) ** -2 for b in ("R", "v", "N"))
    acc = rdp_lib.RdpAccountant(orders=list(ORDERS))
    acc.compose(dp_event.GaussianDpEvent(1 / math.sqrt(d2)))
    # integer orders only on our side (Proposition 14): never better than dp-accounting's fractional grid
    assert compose([cost], 1e-5)["rdp"]["epsilon"] >= acc.get_epsilon(1e-5) * (1 - 1e-9)
    assert compose([cost], 1e-5)["rdp"]["epsilon"] == pytest.approx(acc.get_epsilon(1e-5), rel=0.02)


def test_ledger_records_composes_and_refuses_past_the_budget(tmp_path):
    path = tmp_path / "digits.ledger.json"
    led = PrivacyLedger(path, budget_epsilon=2.2, budget_delta=1e-5)
    cost = ReleaseCost.from_zcdp(0.0359, epsilon=1.0, delta=1e-5, neighbouring=ADD_REMOVE_ONE, label="run 1")
    first = led.record(cost)
    assert first["epsilon"] == 1.0 and first["method"] == "basic"
    second = PrivacyLedger(path).record(cost)  # reopened from the file
    assert 1.4 < second["epsilon"] < 2.0 and second["method"] == "rdp"  # RDP beats 1 + 1
    before = path.read_bytes()
    led = PrivacyLedger(path)
    assert led.budget == {"epsilon": 2.2, "delta": 1e-5}
    led.record(cost)
    with pytest.raises(BudgetExceededError, match=r"^release must keep the ledger .* within its budget"):
        led.record(cost)
    assert len(json.loads(path.read_text())["entries"]) == 3 and path.read_bytes() != before
    with pytest.raises(ParameterError, match=r"^budget must be the ledger's declared"):
        PrivacyLedger(path, budget_epsilon=9.0, budget_delta=1e-5)


def test_ledger_relations(tmp_path):
    ar = ReleaseCost.from_zcdp(0.01, epsilon=0.5, delta=1e-6, neighbouring=ADD_REMOVE_ONE)
    ro = ReleaseCost.from_zcdp(0.01, epsilon=0.5, delta=1e-6, neighbouring=REPLACE_ONE)
    led = PrivacyLedger(tmp_path / "a.json")
    led.record(ro)
    after = led.record(ar)  # add/remove enters a replace-one ledger by group privacy: rho x 4
    assert led.costs()[1].rho == pytest.approx(0.04)
    assert after["basic"]["epsilon"] == pytest.approx(0.5 + 1.0)
    led2 = PrivacyLedger(tmp_path / "b.json")
    led2.record(ar)
    with pytest.raises(ParameterError, match=r"^neighbouring must be 'replace-one' \(a replace-one release"):
        led2.record(ro)


def test_ledger_rejects_a_foreign_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{\"hello\": 1}")
    with pytest.raises(Exception, match=r"^ledger file .* must be a dpdpca ledger, got KeyError$"):
        PrivacyLedger(bad)


def test_releases_without_a_curve_join_by_basic_composition():
    curved = ReleaseCost.from_zcdp(0.03, epsilon=1.0, delta=1e-6, neighbouring=REPLACE_ONE)
    flat = ReleaseCost.from_rdp(lambda a: math.inf, epsilon=0.5, delta=1e-6, neighbouring=REPLACE_ONE)
    out = compose([curved, curved, flat], 1e-5)
    alone = compose([curved, curved], 1e-5 - 1e-6)
    assert out["rdp"]["epsilon"] == pytest.approx(alone["rdp"]["epsilon"] + 0.5)
    assert out["basic"] == {"epsilon": 2.5, "delta": pytest.approx(3e-6)}
    assert out["epsilon"] == min(out["rdp"]["epsilon"], out["basic"]["epsilon"])


def test_a_transaction_sees_what_another_holder_of_the_ledger_recorded(tmp_path):
    """Two processes sharing one budget (two service sessions): check and record under one lock, never both."""
    import threading
    import time as _time

    from dpdpca.dp import BudgetExceededError

    path = tmp_path / "shared.json"
    cost = ReleaseCost.from_zcdp(0.03, epsilon=1.0, delta=1e-5, neighbouring="add/remove-one")
    ledgers = [PrivacyLedger(path, budget_epsilon=1.2, budget_delta=1e-5) for _ in range(2)]  # both read it empty
    outcomes: list[str] = []

    def release(led: PrivacyLedger) -> None:
        try:
            with led.transaction():
                led.check(cost)
                _time.sleep(0.2)  # the release itself, while the other waits
                led.record(cost)
            outcomes.append("released")
        except BudgetExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=release, args=(led,)) for led in ledgers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused", "released"]
    assert len(json.loads(path.read_text())["entries"]) == 1
