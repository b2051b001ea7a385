"""``bench protocol --scheme bfv`` and ``bench timing --scheme bfv``: Paillier beside BFV from one run (tiny sizes)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tenseal", reason="the [lattice] extra (TenSEAL) is not installed")

from dpdpca.cli import main  # noqa: E402


def test_scheme_comparison_reports_both_schemes_and_their_ratios(monkeypatch):
    from dpdpca.bench import protocol

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 12))
    X /= np.linalg.norm(X, axis=1, keepdims=True).max()
    monkeypatch.setattr(protocol, "_fashion", lambda quick: (X, "tiny"))
    monkeypatch.setattr(protocol, "OWNERS", 3)
    out = protocol.scheme_comparison(quick=True, epsilon=1.0, delta=1e-5, key_bits=1024, insecure_test_key=True)
    for scheme in ("paillier", "bfv"):
        assert out[f"d12_{scheme}_cpu_s"] > 0 and out[f"d12_{scheme}_bytes_per_share"] > 0
        assert set(out[f"d12_{scheme}_bytes_sent"]) == {"owner:1", "owner:2", "owner:3", "proxy"}
    assert out["d12_bfv_ratio_cpu_vs_paillier"] == pytest.approx(out["d12_paillier_cpu_s"] / out["d12_bfv_cpu_s"])
    assert out["d12_bfv_bytes_per_share_vs_paillier"] == pytest.approx(
        out["d12_bfv_bytes_per_share"] / out["d12_paillier_bytes_per_share"])
    assert out["d12_bfv_integer_error"] == 0
    assert out["d12_bfv_public_key"]["scheme"] == "bfv" and out["d12_paillier_public_key"]["key_bits"] == 1024
    assert out["d12_scheme_blas_threads"] in (1, None)  # both runs with BLAS on one thread (None: no threadpoolctl)


def test_bench_timing_scheme_bfv_runs_paillier_in_the_same_sweep(capsys):
    assert main(["bench", "timing", "--quick", "--owners", "2,3", "--key-bits", "768", "--insecure-test-key",
                 "--scheme", "bfv", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["scheme"] == "bfv" and result["L"] == [2, 3]
    for key in ("paillier_critical_s", "ratio_vs_paillier_critical", "bytes_vs_paillier", "dpdpca_critical_s"):
        assert len(result[key]) == 2 and all(v > 0 for v in result[key]), key
    for ratio, pai, bfv in zip(result["ratio_vs_paillier_critical"], result["paillier_critical_s"],
                               result["dpdpca_critical_s"]):
        assert ratio == pytest.approx(pai / bfv)
    assert result["crossover_L_paillier"] in (None, 2, 3)
    assert result["floor_of"] == "paillier_critical_s"  # the floor models Paillier's primitives
