"""``dpdpca bench tensor``: files and JSON shape on a tiny grid (the real grid lives in the benchmark)."""

from __future__ import annotations

import json

from dpdpca.bench import tensor as bench
from dpdpca.cli import main


def test_bench_tensor_writes_pngs_and_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench, "QUICK_CONFIGS", {(6, 2): ((300, 600), (150, 300, 600))})
    monkeypatch.setattr(bench, "QUICK_EPSILONS", (1.0, 5.0))
    out_dir = tmp_path / "out"
    assert main(["bench", "tensor", "--quick", "--runs", "1", "--out", str(out_dir), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in out_dir.iterdir()) == ["tensor.json", "tensor_mog.png", "tensor_stm.png"]
    for name in ("tensor_mog.png", "tensor_stm.png"):
        assert (out_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((out_dir / "tensor.json").read_text())
    assert saved["panels"] == printed["panels"] and saved["figures"] == printed["figures"]
    sweeps = {(p["model"], p["sweep"]): p for p in saved["panels"]}
    assert set(sweeps) == {(m, s) for m in ("mog", "stm") for s in ("epsilon", "samples_per_site")}
    eps_panel = sweeps[("mog", "epsilon")]
    assert [(p["samples_per_site"], p["epsilon"]) for p in eps_panel["points"]] == \
        [(300, 1.0), (300, 5.0), (600, 1.0), (600, 5.0)]
    assert [p["samples_per_site"] for p in sweeps[("stm", "samples_per_site")]["points"]] == [150, 300, 600]
    for panel in saved["panels"]:
        for point in panel["points"]:
            assert set(point["methods"]) == {"capeagn", "conv", "local", "nonprivate", "random"}
    assert saved["settings"]["runs"] == 1 and saved["settings"]["blas_threads"] == 1


def test_bench_tensor_without_matplotlib_writes_nothing(tmp_path, capsys, monkeypatch):
    def missing():
        raise bench.MissingDependencyError("bench tensor needs matplotlib for its plots: pip install 'dpdpca[bench]'")

    monkeypatch.setattr(bench, "_require_matplotlib", missing)
    out_dir = tmp_path / "out"
    assert main(["bench", "tensor", "--quick", "--out", str(out_dir)]) == 2
    assert capsys.readouterr().err.strip() == ("dpdpca: error: bench tensor needs matplotlib for its plots: "
                                               "pip install 'dpdpca[bench]'")
    assert not out_dir.exists()
