"""The releases as objects, the privacy setting validated once, and the ledger priced by the noise's calibration."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from dpdpca.dp import BudgetExceededError, PrivacyLedger, ReleaseCost
from dpdpca.errors import ParameterError
from dpdpca.protocol import Proxy
from dpdpca.protocol.config import PrivacySetting, ReleaseOptions
from dpdpca.protocol.releases import ADD_REMOVE, CENTRED, RELEASE_NAMES, ReleaseNoise, as_release

PACKAGE = Path(__file__).resolve().parents[2] / "dpdpca"


def _release_name_comparisons(path: Path) -> list[int]:
    """Lines of ``path`` that compare something with a release's name (``== "centred"``, ``in ("add-remove", ...)``)."""
    names = set(RELEASE_NAMES)
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        consts = [n.value for n in operands if isinstance(n, ast.Constant)]
        consts += [e.value for n in operands if isinstance(n, (ast.Tuple, ast.List, ast.Set))
                   for e in n.elts if isinstance(e, ast.Constant)]
        if names.intersection(c for c in consts if isinstance(c, str)):
            out.append(node.lineno)
    return out


def test_no_module_but_the_release_objects_compares_a_release_name():
    found = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py"))
             if p.name != "releases.py" and (lines := _release_name_comparisons(p))}
    assert found == {}


def test_the_comparison_finder_sees_a_comparison(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('if release == "add-remove" or mode in ("x", "centred"):\n    pass\n')
    assert _release_name_comparisons(probe) == [1, 1]


def test_epsilon_is_validated_in_one_place_on_the_protocol_path():
    """Between the command line and the noise, epsilon is checked once: when the frozen setting is built."""
    checks, callers = [], []
    for sub in ("protocol", "commands", "net"):
        for p in sorted((PACKAGE / sub).rglob("*.py")):
            text = p.read_text()
            if 'check_positive("epsilon"' in text or 'check_epsilon("epsilon"' in text:
                checks.append(p.name)
            if "check_noise_options(" in text.replace("def check_noise_options(", ""):
                callers.append(p.name)
    assert checks == ["bounds.py"]  # check_noise_options
    assert callers == ["config.py"]  # ReleaseOptions.__post_init__
    with pytest.raises(ParameterError, match="epsilon must be > 0"):
        ReleaseOptions(epsilon=0.0)
    with pytest.raises(ParameterError, match=r"epsilon must be in \[1e-06, 1e\+09\]"):  # the library's range too
        ReleaseOptions(epsilon=1e-300)


def test_releases_are_singletons_with_their_relation_and_one_lookup():
    assert as_release("add-remove") is ADD_REMOVE and as_release(CENTRED) is CENTRED
    assert RELEASE_NAMES == ("add-remove", "centred")
    assert ADD_REMOVE.neighbouring == "add/remove-one" and CENTRED.neighbouring == "replace-one"
    for rel in (ADD_REMOVE, CENTRED):
        assert copy.deepcopy(rel) is rel and pickle.loads(pickle.dumps(rel)) is rel
        assert json.dumps({"release": rel}) == json.dumps({"release": str(rel)})
    with pytest.raises(ParameterError, match="release must be one of 'add-remove', 'centred', got 'both'"):
        as_release("both")


def test_the_setting_is_one_frozen_value_resolved_to_its_release():
    s = ReleaseOptions(epsilon=2.0)
    assert PrivacySetting is ReleaseOptions
    assert s.release is ADD_REMOVE and s.kind is ADD_REMOVE and s.neighbouring == "add/remove-one"
    assert ReleaseOptions(sensitivity_mode="paper").release is CENTRED
    assert ReleaseOptions(release="centred").neighbouring == "replace-one"
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.epsilon = 3.0  # frozen
    with pytest.raises(ParameterError, match="neighbouring must be 'replace-one' for release 'centred'"):
        ReleaseOptions(release="centred", neighbouring="add/remove-one")
    with pytest.raises(ParameterError, match="noise_by must be 'proxy' with release 'centred'"):
        ReleaseOptions(release="centred", noise_by="owners")
    with pytest.raises(ParameterError, match="honest_owners must be given only with noise_by 'owners'"):
        ReleaseOptions(honest_owners=2)
    assert ReleaseOptions.from_json(s.to_json()) == s


def test_the_papers_integer_lattice_is_not_dp_and_costs_everything(tmp_path):
    s = ReleaseOptions(epsilon=1.0, delta=1e-5, noise_lattice="integer")
    assert s.release is CENTRED
    noise = s.kind.calibrate(s, d=5, frac_bits=16, kappa=40, n=100)
    cost = noise.cost()
    assert cost.epsilon == float("inf")
    # the report says so too (it promised the requested (1, 1e-5) beside a note saying 'NOT DP')
    assert (noise.report.epsilon, noise.report.delta) == (float("inf"), 1.0)
    assert "NOT differentially private" in noise.report.notes and noise.report.sigma > 0
    with pytest.raises(BudgetExceededError):
        PrivacyLedger(tmp_path / "l.json", budget_epsilon=100.0, budget_delta=1e-3).check(cost)


def test_the_papers_sensitivity_is_reported_and_priced_at_the_proven_one():
    # Wang & Chang's Delta = 1 is below S-bar's proven replace-one sensitivity 4 (N - 1) / N: the noise calibrated
    # to it gives a larger delta, which the report states (the paper's claim in a note) and the ledger pays
    from dpdpca.dp import discrete_gaussian_delta
    from dpdpca.protocol.bounds import integer_noise_sensitivity

    n, d = 100, 5
    paper = ReleaseOptions(epsilon=1.0, delta=1e-5, sensitivity_mode="paper")
    noise = paper.kind.calibrate(paper, d=d, frac_bits=16, kappa=40, n=n)
    _, proven = integer_noise_sensitivity(n, frac_bits=16, sensitivity_mode="rigorous")
    _, claimed = integer_noise_sensitivity(n, frac_bits=16, sensitivity_mode="paper")
    assert proven > 3.9 * claimed and noise.calibration.sensitivity == claimed  # the noise drawn is the paper's
    real = discrete_gaussian_delta(1.0, noise.calibration.sigma_squared, proven)
    assert noise.report.delta >= real > 0.1 and noise.report.sensitivity_mode == "paper"
    assert "the delta at Wang & Chang's Delta = 1: 1.000e-05" in noise.report.notes
    assert noise.rho == pytest.approx(float(proven) ** 2 / (2 * float(noise.calibration.sigma_squared)))
    rigorous = ReleaseOptions(epsilon=1.0, delta=1e-5, release="centred")
    assert rigorous.kind.calibrate(rigorous, d=d, frac_bits=16, kappa=40, n=n).report.delta <= 1e-5 * (1 + 1e-6)


@pytest.mark.parametrize("release", ["add-remove", "centred"])
def test_the_ledger_cost_is_the_calibration_that_draws_the_noise(release):
    s = ReleaseOptions(epsilon=1.0, delta=1e-5, release=release)
    noise = s.kind.calibrate(s, d=5, frac_bits=16, kappa=40, n=100)
    assert isinstance(noise, ReleaseNoise) and noise.report.neighbouring == s.neighbouring
    cost = noise.cost(label="x")
    assert isinstance(cost, ReleaseCost) and cost.neighbouring == s.neighbouring
    if release == "add-remove":
        assert noise.rho == noise.calibration.rho  # the split's D^2 / 2
    else:  # the very discrete Gaussian drawn: rho = Delta_int^2 / (2 sigma^2), plus the mask's TV term
        mech = noise.calibration
        assert noise.rho == pytest.approx(float(mech.sensitivity) ** 2 / (2 * float(mech.sigma_squared)))
        assert noise.delta_extra > 0 and cost.delta_extra == noise.delta_extra
    assert cost.epsilon == 1.0


def _closed_proxy(make_user, make_owner, unit_rows, release, seed=5):
    user = make_user()
    proxy = Proxy(user.params, user.owner_keys, quorum=2, release=release)
    rng = np.random.default_rng(seed)
    for oid in ("1", "2"):
        proxy.receive_share(make_owner(user.params, oid, release=release).share(unit_rows(rng, 6, 3)))
    proxy.close_collection()
    return user, proxy


@pytest.mark.parametrize("release", ["add-remove", "centred"])
def test_finish_with_a_ledger_prices_checks_runs_and_records_once(make_user, make_owner, unit_rows, tmp_path,
                                                                  release):
    ledger_path = tmp_path / "ledger.json"
    user, proxy = _closed_proxy(make_user, make_owner, unit_rows, release)
    setting = ReleaseOptions(epsilon=1.0, delta=1e-5, release=release)
    stale = PrivacyLedger(ledger_path, budget_epsilon=1.5, budget_delta=1e-5)  # another session's, opened first
    out = proxy.finish(setting, ledger=PrivacyLedger(ledger_path, budget_epsilon=1.5, budget_delta=1e-5),
                       label="first")
    entries = json.loads(ledger_path.read_text())["entries"]
    assert len(entries) == 1 and entries[0]["cost"]["label"] == "first"
    assert entries[0]["cost"] == proxy.price(setting).cost(label="first").to_dict()  # the same calibration
    assert user.finish(out, n_components=2).components.shape == (3, 2)
    # another session past the budget: refused before any noise is drawn, nothing recorded or released
    _, second = _closed_proxy(make_user, make_owner, unit_rows, release, seed=6)
    second.record_noise_for_testing = True
    with pytest.raises(BudgetExceededError, match="release must keep the ledger"):
        second.finish(setting, ledger=stale)  # it reads the ledger again under its lock
    assert not hasattr(second, "noise_for_testing_") and not hasattr(second, "noise_blocks_for_testing_")
    assert not second.ledger.is_released(second.params.session_id)
    assert len(json.loads(ledger_path.read_text())["entries"]) == 1


def test_finish_refuses_a_setting_for_another_release(make_user, make_owner, unit_rows):
    _, proxy = _closed_proxy(make_user, make_owner, unit_rows, "add-remove")
    with pytest.raises(ParameterError, match="release must be 'add-remove'"):
        proxy.finish(ReleaseOptions(release="centred"))
    with pytest.raises(ParameterError, match="epsilon must be > 0"):
        proxy.finish(epsilon=-1.0, delta=1e-5)


def test_library_parties_default_to_the_clis_release(make_user, make_owner, keypair):
    from dpdpca.protocol import ProtocolParams

    user = make_user()
    assert Proxy(user.params, user.owner_keys).release is ADD_REMOVE
    assert make_owner(user.params, "1").release is ADD_REMOVE
    assert ProtocolParams.create(keypair[0], max_owners=2, max_rows_per_owner=4).release == "add-remove"
    from dpdpca.protocol import DPDPCA

    est = DPDPCA(n_components=2)  # rigorous, analytic, and the CLI's release
    setting = est.options().release
    assert setting.release is ADD_REMOVE and setting == ReleaseOptions()
    assert (setting.calibration, setting.sensitivity_mode, setting.noise_lattice) == ("analytic", "rigorous",
                                                                                      "n-scaled")


def test_a_release_past_the_budget_is_refused_by_type_across_processes(tmp_path, unit_rows):
    """Under the processes launcher the proxy's refusal crosses a pipe by name and comes back as itself."""
    from dpdpca.protocol import run_protocol

    rng = np.random.default_rng(8)
    parts = [unit_rows(rng, 4, 3) for _ in range(2)]
    ledger = PrivacyLedger(tmp_path / "budget.json", budget_epsilon=0.5, budget_delta=1e-5)
    with pytest.raises(BudgetExceededError, match="release must keep the ledger"):
        run_protocol(parts, n_components=1, epsilon=1.0, delta=1e-5, key_bits=768, insecure_test_key=True,
                     processes=True, ledger=ledger)
