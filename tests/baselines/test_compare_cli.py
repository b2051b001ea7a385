"""``dpdpca compare``: JSON shape, table, files, one-line errors, no partial output."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpdpca.cli import main


def run_cli(capsys, *args):
    code = main(["compare", *args])
    out, err = capsys.readouterr()
    return code, out, err


BASE = ["--sites", "4", "--components", "5", "--epsilon", "1", "--delta", "1e-5"]


def test_compare_json_on_digits(capsys, tmp_path):
    out_file = tmp_path / "summary.json"
    code, out, err = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "nonprivate,capepca,conv,local",
                             "--runs", "3", "--seed", "0", "--json", "--output", str(out_file))
    assert code == 0, err
    summary = json.loads(out)
    assert json.loads(out_file.read_text()) == summary
    methods = summary["methods"]
    assert set(methods) == {"nonprivate", "capepca", "conv", "local"}
    assert methods["nonprivate"]["captured_energy_ratio"] == pytest.approx(1.0, abs=1e-12)
    for name in ("capepca", "conv", "local"):
        row = methods[name]
        assert set(row) >= {"captured_energy_ratio", "std", "privacy", "time_s"}
        assert 0 < row["captured_energy_ratio"] < 1 and row["std"] > 0 and row["time_s"] > 0
        assert row["privacy"]["epsilon"] == 1.0 and row["privacy"]["delta"] == 1e-5
    assert methods["capepca"]["privacy"]["mechanism"] == "cape"
    assert summary["dataset"]["shape"] == [1797, 64] and summary["dataset"]["sites"] == 4
    assert summary["preprocessing"] == {"center": True, "scaling": "clip", "exact_mean": False,
                                        "note": "clip scaling is a public rule"}
    assert summary["settings"] == {"paper": False, "relation": "add-remove", "calibration": "analytic",
                                   "sensitivity_mode": "rigorous", "cape_variances": "rigorous", "scaling": "clip", "center": True,
                                   "exact_mean": False}
    for name in ("capepca", "conv", "local"):
        assert methods[name]["centering"] == "inside the release (DP)" and methods[name]["kind"] == "subspace"
        assert methods[name]["privacy"]["calibration"] == "analytic"
        assert methods[name]["privacy"]["neighbouring"] == "add/remove-one"
    assert "DP against the aggregator's joint view" in methods["capepca"]["privacy"]["notes"]
    assert methods["nonprivate"]["centering"] == "exact pooled mean (not DP)"
    # the same seed gives the same numbers
    code, out2, _ = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "nonprivate,capepca,conv,local",
                            "--runs", "3", "--seed", "0", "--json")
    assert json.loads(out2)["methods"]["capepca"]["ratios"] == methods["capepca"]["ratios"]


def test_compare_table_and_options(capsys):
    code, out, err = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "dpdispca,pooled,private-local-pca",
                             "--calibration", "analytic", "--sensitivity-mode", "rigorous", "--scaling", "clip")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("dataset digits (1797 x 64), 4 sites, K=5")
    assert "scaling=clip" in lines[0]
    assert lines[1].startswith("setting: rigorous: relation add-remove, sensitivity rigorous, calibration analytic")
    assert [ln.split()[0] for ln in lines[3:]] == ["dpdispca", "pooled", "private-local-pca"]
    assert all(ln.split()[5:9] == ["add/remove-one", "gaussian", "rigorous", "analytic"] for ln in lines[3:])
    # the columns are aligned: every header starts where its cells start
    header = lines[2]
    for name in ("relation", "mechanism", "sens.mode", "calib.", "centring"):
        col = header.index(name)
        assert all(ln[col - 1] == " " and ln[col] != " " for ln in lines[3:]), name
    code, out, err = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "pooled", "--json",
                             "--calibration", "analytic", "--sensitivity-mode", "rigorous")
    privacy = json.loads(out)["methods"]["pooled"]["privacy"]
    assert privacy["calibration"] == "analytic" and privacy["sensitivity_mode"] == "rigorous"
    # add/remove (the default): the protocol's release, noisy R, v, N with unit sensitivities
    assert privacy["neighbouring"] == "add/remove-one" and privacy["sensitivity"] == 1.0
    assert [p["notes"].split(":")[0] for p in privacy["parts"]] == ["block R", "block v", "block N"]
    code, out, err = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "pooled", "--json",
                             "--relation", "replace-one")
    privacy = json.loads(out)["methods"]["pooled"]["privacy"]
    assert privacy["neighbouring"] == "replace-one"
    # the centred second moment, paid for in the release: 4 (N - 1) / N^2
    assert privacy["sensitivity"] == pytest.approx(4 * 1796 / 1797**2)
    code, out, err = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "pooled", "--json", "--exact-mean",
                             "--relation", "replace-one")
    summary = json.loads(out)
    assert summary["methods"]["pooled"]["privacy"]["sensitivity"] == pytest.approx(np.sqrt(2) / 1797)
    assert summary["methods"]["pooled"]["centering"] == "exact pooled mean before partitioning (not DP)"
    assert "(not DP)" in summary["preprocessing"]["note"]


def test_compare_paper_moves_every_method_to_the_papers_settings(capsys):
    code, out, err = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "dpdispca,capepca,local,nonprivate",
                             "--paper", "--json", "--seed", "1")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["settings"] == {"paper": True, "relation": "replace-one", "calibration": "classic",
                                   "sensitivity_mode": "paper", "cape_variances": "paper", "scaling": "max-norm",
                                   "center": True, "exact_mean": True}
    for name in ("dpdispca", "capepca", "local"):
        row = summary["methods"][name]
        assert (row["privacy"]["calibration"], row["privacy"]["sensitivity_mode"]) == ("classic", "paper")
        assert row["centering"] == "exact pooled mean before partitioning (not DP)"
        # the papers' Delta = 1/N_s is too small under replace-one: the report states the delta really had
        assert row["privacy"]["delta"] > 1e-5 and "proven L2 sensitivity" in row["privacy"]["notes"]
    # the paper's CAPE variances, checked against the aggregator's joint view at the proven sensitivity
    cape = summary["methods"]["capepca"]["privacy"]
    assert "the paper's CAPE variances" in cape["notes"] and "joint view has max_s" in cape["notes"]
    assert cape["delta"] > summary["methods"]["dpdispca"]["privacy"]["delta"]
    assert "max-norm scaling reads the data and is not DP" in summary["preprocessing"]["note"]
    # one item can still be moved explicitly, for every method alike
    code, out, err = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "dpdispca,capepca", "--paper",
                             "--calibration", "analytic", "--json")
    rows = json.loads(out)["methods"]
    assert {r["privacy"]["calibration"] for r in rows.values()} == {"analytic"}


def test_compare_data_file_and_site_size(capsys, tmp_path):
    X = np.random.default_rng(0).normal(size=(120, 6))
    path = tmp_path / "x.csv"
    np.savetxt(path, X, delimiter=",", header="a,b,c,d,e,f", comments="")
    code, out, err = run_cli(capsys, "--data", str(path), "--sites", "3", "--site-size", "30", "--components", "2",
                             "--epsilon", "2", "--delta", "1e-5", "--methods", "capepca,nonprivate", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["dataset"]["site_sizes"] == [30, 30, 30] and summary["dataset"]["name"] == "file"


@pytest.mark.parametrize("args, match", [
    (["--dataset", "digits", "--data", "x.csv", *BASE], "exclusive"),
    (["--dataset", "digits", *BASE, "--methods", "capepca,pca"], "method must be one of"),
    (["--dataset", "digits", "--sites", "4", "--components", "65", "--epsilon", "1", "--delta", "1e-5"],
     "--components must be <= 64, got 65"),
    (["--dataset", "digits", "--sites", "5000", "--components", "5", "--epsilon", "1", "--delta", "1e-5"],
     r"--sites must be <= the number of rows \(1797\), got 5000"),
    (["--dataset", "digits", *BASE[:-2], "--delta", "2", "--methods", "capepca"], r"--delta must be in \(0, 1\)"),
    (["--dataset", "digits", *BASE, "--methods", "capepca", "--runs", "0"], "--runs must be >= 1, got 0"),
    (["--dataset", "digits", *BASE, "--methods", "capepca", "--scaling", "none"], "L2 norm <= 1"),
    (["--dataset", "digits", *BASE, "--methods", "capepca", "--site-size", "1000"],
     r"^dpdpca: error: --site-size must be <= 449 rows per site \(1797 rows, 4 sites\), got 1000$"),
    # a budget outside [1e-6, 1e9] (an OverflowError, a ValueError in the analytic calibration)
    (["--dataset", "digits", *BASE[:4], "--epsilon", "1e-300", "--delta", "1e-5", "--methods", "pooled"],
     r"^dpdpca: error: --epsilon must be in \[1e-06, 1e\+09\], got 1e-300$"),
    (["--dataset", "digits", *BASE[:4], "--epsilon", "1e308", "--delta", "1e-5", "--methods", "pooled"],
     r"^dpdpca: error: --epsilon must be in \[1e-06, 1e\+09\], got 1e\+308$"),
    # delta < 1/N as in dpdpca run (N = 4 x 10 rows used; it ran)
    (["--dataset", "digits", "--sites", "4", "--site-size", "10", "--components", "2", "--epsilon", "1",
      "--delta", "0.03", "--methods", "pooled"], r"--delta must be < 1/N = 0\.025 \(N = 40 rows\), got 0\.03"),
    # runs at most 10^4 (10^12 was a MemoryError pricing the runs)
    (["--dataset", "digits", *BASE, "--methods", "pooled", "--runs", "1000000000000"],
     "--runs must be <= 10000, got 1000000000000"),
])
def test_compare_errors_are_one_line(capsys, tmp_path, args, match):
    out_file = tmp_path / "never.json"
    code, out, err = run_cli(capsys, *args, "--output", str(out_file))
    assert code == 2
    assert err.startswith("dpdpca: error: ") and err.count("\n") == 1
    import re

    assert re.search(match, err), err
    assert not out_file.exists() and list(tmp_path.iterdir()) == []  # no partial output


def test_compare_refuses_a_negative_seed(capsys):
    """--seed -1 was numpy's ValueError traceback: click's range check now (exit 2, the option named)."""
    code, _, err = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "pooled", "--seed", "-1")
    assert code == 2 and "Traceback" not in err
    assert err == ("dpdpca: error: Invalid value for '--seed': -1 is not in the range x>=0. (see 'dpdpca compare "
                   "--help')\n"), err


def test_compare_refuses_an_unwritable_output_before_the_ledger_records_the_runs(capsys, tmp_path):
    """compare --ledger records every run's cost: an --output under a file is refused before any method runs
    (before, the ledger held the runs and the summary was lost), and nothing is left behind."""
    blocker = tmp_path / "notadir"
    blocker.write_text("a file where --output wants a directory")
    budget = tmp_path / "budget.json"
    args = ["--dataset", "digits", *BASE, "--methods", "capepca", "--ledger", str(budget)]
    bad = blocker / "summary.json"
    code, _, err = run_cli(capsys, *args, "--output", str(bad))
    assert code == 2 and err == (f"dpdpca: error: --output {str(bad)!r} must be in a directory, got "
                                 f"{str(blocker)!r}, which is not a directory\n")
    assert not budget.exists()
    good = tmp_path / "out" / "summary.json"
    code, _, err = run_cli(capsys, *args, "--output", str(good))
    assert code == 0, err
    assert json.loads(good.read_text())["ledger"]["releases"] == 1 and len(json.loads(budget.read_text())["entries"]) == 1
    assert not list(tmp_path.rglob(".*.tmp"))


def test_compare_ledger_records_the_delta_a_classic_calibration_really_achieves(tmp_path):
    """Classic calibration at epsilon >= 1 achieves a larger delta than asked, as each method's report says: the
    ledger records that delta (it recorded the requested one), and a budget between the two is refused up front."""
    from dpdpca.commands.compare import run_compare
    from dpdpca.dp import GaussianMechanism, PrivacyLedger
    from dpdpca.errors import BudgetExceededError

    eps, delta = 10.0, 1e-5
    achieved = GaussianMechanism(epsilon=eps, delta=delta, sensitivity=1.0, calibration="classic").achieved_delta
    assert achieved > 2 * delta
    kw = dict(dataset="digits", sites=3, components=3, epsilon=eps, delta=delta, methods="pooled,dpdispca-full",
              calibration="classic", relation="replace-one")
    ledger = PrivacyLedger(tmp_path / "ledger.json", budget_epsilon=100.0, budget_delta=1e-3)
    summary = run_compare(**kw, ledger=ledger)
    recorded = [e["cost"]["delta"] for e in PrivacyLedger(tmp_path / "ledger.json").entries]
    assert recorded == [summary["methods"][m]["privacy"]["delta"] for m in ("pooled", "dpdispca-full")]
    assert recorded == [pytest.approx(achieved)] * 2
    tight = PrivacyLedger(tmp_path / "tight.json", budget_epsilon=100.0, budget_delta=3 * delta)  # 2 x asked fits
    with pytest.raises(BudgetExceededError):
        run_compare(**kw, ledger=tight)
    assert not (tmp_path / "tight.json").exists()


def test_a_method_whose_report_carries_more_than_the_request_is_refused_before_it_runs(tmp_path):
    """The papers' sensitivity (--paper): a method's report states the larger delta it really has at the proven
    sensitivity, and its price is that report's (made before any private row is read), so a budget between the
    request and it refuses up front: nothing runs, nothing is recorded.  It used to be priced at the request's
    delta, run, and be refused only when recorded."""
    from dpdpca.commands.compare import run_compare
    from dpdpca.dp import PrivacyLedger
    from dpdpca.errors import BudgetExceededError

    kw = dict(dataset="digits", sites=3, components=3, epsilon=1.0, delta=1e-5, methods="pooled",
              calibration="classic", sensitivity_mode="paper", relation="replace-one")
    with pytest.raises(BudgetExceededError, match="within its budget") as info:
        run_compare(**kw, ledger=PrivacyLedger(tmp_path / "tight.json", budget_epsilon=1.5, budget_delta=2e-5))
    assert "had run" not in str(info.value) and not (tmp_path / "tight.json").exists()
    summary = run_compare(**kw, ledger=PrivacyLedger(tmp_path / "ledger.json", budget_epsilon=1.5,
                                                      budget_delta=0.2))
    recorded = [e["cost"]["delta"] for e in PrivacyLedger(tmp_path / "ledger.json").entries]
    assert recorded == [pytest.approx(summary["methods"]["pooled"]["privacy"]["delta"])]
    assert recorded[0] > 100 * 1e-5  # the delta the noise gives at the proven sensitivity, not the 1e-5 asked


def test_capepca_under_the_papers_variances_is_priced_at_its_joint_view_delta(tmp_path):
    """CAPE's paper variances protect each release alone; against the aggregator's joint view the delta is
    larger, and the report says so.  The price before the run is that delta (it was the Gaussian's at the
    request), so the whole --paper comparison that passed the check and was refused after running is now
    refused before."""
    from dpdpca.commands.compare import run_compare
    from dpdpca.dp import PrivacyLedger
    from dpdpca.errors import BudgetExceededError

    kw = dict(dataset="digits", sites=5, components=5, epsilon=1.0, delta=1e-5, methods="capepca", paper=True)
    summary = run_compare(**kw, ledger=PrivacyLedger(tmp_path / "ledger.json", budget_epsilon=10.0,
                                                      budget_delta=0.1))
    joint = summary["methods"]["capepca"]["privacy"]["delta"]
    assert joint > 1e-4  # the joint view's delta, far above the request
    assert [e["cost"]["delta"] for e in PrivacyLedger(tmp_path / "ledger.json").entries] == [pytest.approx(joint)]
    with pytest.raises(BudgetExceededError, match="within its budget") as info:
        run_compare(**kw, ledger=PrivacyLedger(tmp_path / "tight.json", budget_epsilon=10.0, budget_delta=joint / 2))
    assert "had run" not in str(info.value) and not (tmp_path / "tight.json").exists()


def test_a_run_reported_above_its_price_is_still_recorded_then_refused(tmp_path, monkeypatch):
    """The safety net behind the price: were a run's report ever above what was priced (here the planner is made
    to price at the request), the ledger records what ran, then refuses in one line."""
    import dpdpca.commands.compare as cmp
    from dpdpca.dp import GaussianMechanism, PrivacyLedger, ReleaseCost
    from dpdpca.errors import BudgetExceededError

    def at_the_request(name, shapes, *, epsilon, delta, label, **kw):
        mech = GaussianMechanism(epsilon=epsilon, delta=delta, sensitivity=1.0, calibration="classic")
        return ReleaseCost.from_rdp(lambda a: float("inf"), epsilon=epsilon, delta=mech.achieved_delta,
                                    neighbouring="replace-one", mechanism=name, label=label)

    monkeypatch.setattr(cmp, "_planned_cost", at_the_request)
    kw = dict(dataset="digits", sites=3, components=3, epsilon=1.0, delta=1e-5, methods="pooled",
              calibration="classic", sensitivity_mode="paper", relation="replace-one")
    with pytest.raises(BudgetExceededError, match="recorded: the methods had run"):
        cmp.run_compare(**kw, ledger=PrivacyLedger(tmp_path / "ledger.json", budget_epsilon=1.5, budget_delta=2e-5))
    recorded = [e["cost"]["delta"] for e in PrivacyLedger(tmp_path / "ledger.json").entries]
    assert len(recorded) == 1 and recorded[0] > 3e-5


def test_compare_prices_the_protocol_at_the_rows_it_runs_on(monkeypatch, tmp_path):
    """--site-size runs the protocol on sites x site_size rows: its centred release is priced at that N (the mask's
    delta term depends on N), not at the dataset's row count."""
    import dpdpca.commands.compare as cmp
    from dpdpca.dp import PrivacyLedger

    seen: dict = {}
    price = cmp._price

    class Stop(Exception):
        pass

    def spy(names, runs, **kw):
        seen.update(kw)
        return price(names, runs, **kw)

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(cmp, "_price", spy)
    monkeypatch.setattr(cmp, "compare", stop)
    with pytest.raises(Stop):
        cmp.run_compare(dataset="digits", sites=3, site_size=50, components=3, methods="dpdpca-centred",
                        relation="replace-one", ledger=PrivacyLedger(tmp_path / "l.json", budget_epsilon=10.0,
                                                                    budget_delta=1e-3))
    assert seen["n"] == 150


def test_compare_rejects_nan_file(capsys, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("1,2\n3,nan\n5,6\n")
    code, _, err = run_cli(capsys, "--data", str(path), "--sites", "2", "--components", "1", "--epsilon", "1",
                           "--delta", "1e-5", "--methods", "capepca")
    assert code == 2 and "non-finite value in row 1" in err and "bad.csv" in err


def test_compare_f1_on_held_out_rows(capsys, tmp_path):
    code, out, err = run_cli(capsys, "--dataset", "digits", "--sites", "10", "--components", "10", "--epsilon", "1",
                             "--delta", "1e-5", "--methods", "nonprivate,local", "--runs", "2", "--seed", "0",
                             "--f1-test-fraction", "0.3", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["f1"]["test_rows"] == 539 and summary["f1"]["train_rows"] == 1258
    assert summary["dataset"]["rows_used"] == 1258  # the test rows never reach a pipeline
    rows = summary["methods"]
    assert rows["nonprivate"]["f1"] > 0.95 and rows["nonprivate"]["f1_std"] == pytest.approx(0, abs=1e-12)
    assert 0 < rows["local"]["f1"] < rows["nonprivate"]["f1"]
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).normal(size=(50, 4)))
    code, _, err = run_cli(capsys, "--data", str(path), "--sites", "2", "--components", "1", "--epsilon", "1",
                           "--delta", "1e-5", "--methods", "nonprivate", "--f1-test-fraction", "0.2")
    assert code == 2 and "needs a labelled --dataset" in err
    code, _, err = run_cli(capsys, "--dataset", "digits", *BASE, "--methods", "nonprivate", "--f1-test-fraction", "1.5")
    assert code == 2 and "--f1-test-fraction must be in (0, 1), got 1.5" in err


@pytest.mark.slow
@pytest.mark.parametrize("paper", [False, True], ids=["rigorous", "paper"])
def test_dpdpca_and_pooled_agree_at_equal_settings(paper):
    """The proxy adds pooled-level noise, so at equal settings DPDPCA sits near the trusted curator.

    Digits, 10 owners, k = 10, epsilon = 1, replace-one (the centred release).
    Measured with 8 runs each: rigorous 0.313 (dpdpca) vs 0.336 (pooled).  The
    per-run standard deviation is about 0.04 (rigorous) and 0.01 (paper).
    """
    from dpdpca.commands.compare import run_compare

    # the protocol's centred release is the one whose noise is the pooled curator's under replace-one
    s = run_compare(dataset="digits", data=None, sites=10, components=10, epsilon=1.0, delta=1e-5,
                    methods="dpdpca-centred,pooled", runs=3, seed=3, paper=paper, relation="replace-one",
                    method_options={"dpdpca-centred": {"key_bits": 768, "insecure_test_key": True}})
    dp, pooled = s["methods"]["dpdpca-centred"], s["methods"]["pooled"]
    assert dp["privacy"]["sensitivity_mode"] == pooled["privacy"]["sensitivity_mode"]
    # analytic calibration is, for the protocol's discrete Gaussian, the rounding-coupling bound
    assert (pooled["privacy"]["calibration"], dp["privacy"]["calibration"]) == \
        (("classic", "classic") if paper else ("analytic", "analytic"))
    # the same noise multiplier sigma / Delta up to the discrete Gaussian's calibration (within 15%)
    ratio = (dp["privacy"]["sigma"] / dp["privacy"]["sensitivity"]) / \
        (pooled["privacy"]["sigma"] / pooled["privacy"]["sensitivity"])
    assert 1.0 <= ratio < 1.15 if not paper else ratio == pytest.approx(1.0, rel=1e-6)
    # About 4.5 standard errors (rigorous) of the difference of two 3-run means with the per-run standard deviations
    # above; the sigma-multiplier check above is the exact part of this test.  Paper setting: the pooled side's
    # 3-run mean is pinned by the seed (0.7831) while DPDPCA's noise comes from the OS, so the difference is not
    # centred on 0: over 31 draws it was -0.026 on average with a standard deviation of about 0.011 (-0.047 at
    # the lowest; a CI run saw -0.0535 against the former tolerance 0.05), so 0.09 is about 6 of them from the mean.
    tol = 0.15 if not paper else 0.09
    assert abs(dp["captured_energy_ratio"] - pooled["captured_energy_ratio"]) < tol
    assert pooled["captured_energy_ratio"] > (0.6 if paper else 0.2)


@pytest.mark.slow
def test_default_add_remove_dpdpca_pooled_and_capepca_agree():
    """Under the default add/remove relation the curator releases exactly the protocol's noisy R, v, N.

    Digits, 10 owners, k = 10, epsilon = 1: the same sigma for every block, and q/q_o within 0.08 (3-run
    means; per-run standard deviation about 0.02, so about 4.5 standard errors of the difference).
    """
    from dpdpca.commands.compare import run_compare

    s = run_compare(dataset="digits", sites=10, components=10, epsilon=1.0, delta=1e-5,
                    methods="dpdpca,pooled,capepca", runs=3, seed=0,
                    method_options={"dpdpca": {"key_bits": 768, "insecure_test_key": True}})
    rows = s["methods"]
    assert {r["privacy"]["neighbouring"] for r in rows.values()} == {"add/remove-one"}
    sigmas = [[p["sigma"] for p in r["privacy"]["parts"]] for r in rows.values()]
    for other in sigmas[1:]:
        assert other == pytest.approx(sigmas[0], rel=1e-9)
    for name in ("dpdpca", "capepca"):
        assert abs(rows[name]["captured_energy_ratio"] - rows["pooled"]["captured_energy_ratio"]) < 0.08
    assert rows["pooled"]["captured_energy_ratio"] > 0.5


def test_compare_takes_runs_defaults(capsys):
    """No options: run's defaults (digits, 5 sites, K = 5, epsilon 1, delta 1e-5), the rigorous setting."""
    code, out, err = run_cli(capsys, "--methods", "nonprivate,pooled", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["dataset"]["name"] == "digits" and summary["dataset"]["sites"] == 5
    assert (summary["n_components"], summary["epsilon"], summary["delta"]) == (5, 1.0, 1e-5)
    assert summary["settings"]["relation"] == "add-remove"
    assert summary["methods"]["pooled"]["privacy"]["neighbouring"] == "add/remove-one"


def test_compare_flags_private_methods_whose_reported_budget_differs():
    from dpdpca.commands.compare import format_table, run_compare
    from dpdpca.driver import budget_check

    rigorous = run_compare(dataset="digits", sites=4, components=3, methods="pooled,dpdispca,nonprivate", seed=0)
    assert rigorous["budgets"]["equal"] and rigorous["budgets"]["off_request"] == []
    assert set(rigorous["budgets"]["reported"]) == {"pooled", "dpdispca"}  # the non-private row has no budget
    assert "warning" not in format_table(rigorous)
    # --paper --epsilon 2: the papers' calibrations really give larger deltas, and CAPE's joint view more still
    paper = run_compare(dataset="digits", sites=4, components=3, methods="dpdispca,capepca", seed=0, paper=True,
                        epsilon=2.0)
    b = paper["budgets"]
    assert not b["equal"] and b["off_request"] == ["dpdispca", "capepca"]
    assert b["reported"]["capepca"]["delta"] == paper["methods"]["capepca"]["privacy"]["delta"] > \
        b["reported"]["dpdispca"]["delta"] > 1e-5
    table = format_table(paper)
    assert "warning: reported (epsilon, delta) differ among the private methods: dpdispca (2, " in table
    row = next(line for line in table.splitlines() if line.startswith("capepca"))
    assert row.split()[3:5] == ["2", "0.002*"]  # epsilon as requested, delta marked
    # one method off among equal others is flagged too; all off but equal is said plainly
    rows = {"a": {"privacy": {"epsilon": 1.0, "delta": 1e-5}}, "b": {"privacy": {"epsilon": 1.0, "delta": 2.06e-5}},
            "c": {"privacy": {"epsilon": "inf", "delta": 1.0}}}
    check = budget_check(rows, 1.0, 1e-5)
    assert (check["equal"], check["off_request"]) == (False, ["b"]) and set(check["reported"]) == {"a", "b"}
    rows["a"]["privacy"]["delta"] = 2.06e-5
    assert "at one guarantee, not the requested one" in budget_check(rows, 1.0, 1e-5)["note"]
