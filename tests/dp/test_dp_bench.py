"""``dpdpca bench dp --quick --json`` runs and reports the documented keys (no speed assertion)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from dpdpca.bench.dp import command


def test_bench_dp_quick_json_has_documented_keys():
    result = CliRunner().invoke(command, ["--quick", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out["discrete_gaussian_samples_per_s"]) == {"10", "1e+06", "1e+09", "1e+12", "1e+18"}
    assert all(v > 0 for v in out["discrete_gaussian_samples_per_s"].values())
    assert set(out["sigma_analytic_over_classic"]) == {"0.1", "1", "4"}
    assert all(0 < v < 1 for v in out["sigma_analytic_over_classic"].values())
    assert all(1 < v < 1.15 for v in out["sigma_discrete_over_analytic"].values())
    assert out["quick"] is True and out["samples"] == 20_000


def test_bench_dp_table():
    result = CliRunner().invoke(command, ["--quick"])
    assert result.exit_code == 0 and "analytic/classic" in result.output
