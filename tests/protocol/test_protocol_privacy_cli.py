"""``run`` and ``compare`` with public feature bounds and a privacy ledger."""

from __future__ import annotations

import json

import numpy as np

from dpdpca.cli import main

SMALL = ["--key-bits", "1024", "--insecure-test-key"]


def test_run_scales_by_the_datasets_bounds_records_the_release_and_refuses_past_the_budget(tmp_path, capsys):
    ledger = tmp_path / "digits.ledger.json"
    argv = ["run", "--owners", "3", "--components", "2", *SMALL, "--json", "--ledger", str(ledger),
            "--budget-epsilon", "1.5", "--budget-delta", "1e-5"]
    assert main(argv) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["release"] == "add-remove" and s["privacy"]["neighbouring"] == "add/remove-one"
    assert s["feature_bounds"]["rows_out_of_bounds"] == 0 and s["feature_bounds"]["hi"] == 16.0
    assert all(v == 0 for v in s["rows_clipped"].values())  # no row needed clipping
    assert s["ledger"]["releases"] == 1 and s["ledger"]["epsilon"] == 1.0
    before = ledger.read_bytes()
    assert main(argv) == 2  # a second release would pass epsilon 1.5
    err = capsys.readouterr().err
    assert err.startswith("dpdpca: error: release must keep the ledger") and err.count("\n") == 1
    assert ledger.read_bytes() == before


def test_run_with_owners_noise_reports_every_coalition(capsys):
    assert main(["run", "--owners", "4", "--components", "2", *SMALL, "--json", "--noise-by", "owners",
                 "--honest-owners", "3", "--verify"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["verify"]["max_abs_integer_error"] == 0
    assert set(s["coalitions"]) == {"proxy", "user", "proxy+user", "proxy+user+1 owners"}
    assert s["privacy"]["noise_added_by"] == "owners" and s["privacy"]["epsilon"] <= 1.0


def test_run_bad_release_options_are_one_line_errors(capsys):
    assert main(["run", "--release", "centred", "--noise-by", "owners", *SMALL]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpdpca: error: --noise-by must be 'proxy' with release 'centred'") and err.count("\n") == 1
    assert main(["run", "--feature-bounds", "3", "3", *SMALL]) == 2
    assert "feature_bounds must be finite with lo < hi" in capsys.readouterr().err


def test_compare_prices_every_run_first(tmp_path, capsys):
    X = np.random.default_rng(0).uniform(0, 10, size=(120, 4))
    data = tmp_path / "x.npy"
    np.save(data, X)
    ledger = tmp_path / "x.ledger.json"
    base = ["compare", "--data", str(data), "--sites", "3", "--components", "2", "--epsilon", "1", "--delta", "1e-5",
            "--methods", "pooled,nonprivate", "--feature-bounds", "0", "10", "--ledger", str(ledger), "--json"]
    assert main(base + ["--runs", "2"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["ledger"]["releases"] == 2 and s["ledger"]["basic"]["epsilon"] == 2.0
    assert main(base + ["--runs", "2", "--budget-epsilon", "3", "--budget-delta", "1e-3"]) == 2
    assert "release must keep the ledger" in capsys.readouterr().err
    assert len(json.loads(ledger.read_text())["entries"]) == 2
