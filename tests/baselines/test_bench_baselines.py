"""``dpdpca bench baselines``: output shape only (speed goals live in the benchmark itself)."""

from __future__ import annotations

import json

import numpy as np

from dpdpca.bench import baselines as bench
from dpdpca.cli import main
from dpdpca.data import make_covariance_data, preprocess


def test_bench_baselines_json(capsys, monkeypatch):
    small = preprocess(make_covariance_data(2000, 60, rng=np.random.default_rng(0)))
    monkeypatch.setattr(bench, "load_bench_data", lambda quick: (small, "tiny", "test data"))
    monkeypatch.setattr(bench, "N_COMPONENTS", 5)
    assert main(["bench", "baselines", "--quick", "--repeats", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["blas_threads"] == 1
    for key in ("ratio_to_pooled_eigh", "ratio_to_pooled_second_moment_eigh", "critical_path_ratio", "noise_share",
                "ratio_to_pooled_eigh_seeded_noise"):
        assert set(out[key]) == {"capepca", "dpdispca"}
        assert all(v > 0 for v in out[key].values())
    assert all(0 <= v <= 1 for v in out["noise_share"].values())
    seconds = out["seconds"]
    for m in ("capepca", "dpdispca"):  # each ratio is the method's best time over its own reference's
        assert out["ratio_to_pooled_eigh"][m] == seconds[m] / seconds["pooled_eigh"]
        assert out["ratio_to_pooled_second_moment_eigh"][m] == seconds[m] / seconds["pooled_second_moment_eigh"]
    assert (out["dataset"], out["n"], out["d"], out["sites"], out["quick"]) == ("tiny", 2000, 60, 10, True)
    assert out["goal"] == 1.5 and out["stretch_goal"] == 1.1
    assert main(["bench", "baselines", "--quick", "--repeats", "1"]) == 0
    text = capsys.readouterr().out
    assert "tiny (2000 x 60)" in text and "capepca" in text and "dpdispca" in text


def test_bench_falls_back_to_named_synthetic(monkeypatch):
    from dpdpca.data import loaders

    monkeypatch.setattr(loaders, "FASHION_MNIST_DIR", loaders.FASHION_MNIST_DIR / "absent")
    X, name, source = bench.load_bench_data(quick=True)
    assert name == "synthetic-d784-n60000" and X.shape == (6000, 784)
    assert np.linalg.norm(X, axis=1).max() <= 1 + 1e-12
