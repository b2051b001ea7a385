"""``dpdpca compare`` with fpca, mod-sulq and sketch; ``dpdpca bench streaming`` at a tiny size."""

from __future__ import annotations

import json

import pytest

from dpdpca.bench import streaming
from dpdpca.cli import main
from dpdpca.settings import privacy_summary


def test_compare_runs_fpca_mod_sulq_and_sketch_with_privacy_time_and_traffic(capsys):
    code = main(["compare", "--dataset", "digits", "--sites", "4", "--components", "5", "--epsilon", "1",
                 "--delta", "1e-5", "--methods", "fpca,mod-sulq,sketch,frequent-directions",
                 "--seed", "0", "--json", "--relation", "replace-one"])
    out, err = capsys.readouterr()
    assert code == 0, err
    methods = json.loads(out)["methods"]
    d, k = 64, 5
    for name in ("fpca", "mod-sulq", "sketch"):
        row = methods[name]
        assert row["privacy"]["epsilon"] == 1.0 and row["privacy"]["delta"] == 1e-5
        assert privacy_summary(row["privacy"])["sigma"] > 0 and row["time_s"] > 0
        assert 0 < row["captured_energy_ratio"] <= 1 + 1e-9
    # communication: FPCA sends a d x r subspace per site, the sketch m numbers (and the count)
    assert methods["fpca"]["bytes_sent"]["site:1"] == 8 * (d * (k + 10) + (k + 10))
    assert {methods[m]["privacy"]["neighbouring"] for m in ("fpca", "mod-sulq", "sketch")} == {"replace-one"}
    assert {methods[m]["privacy"]["calibration"] for m in ("fpca", "mod-sulq", "sketch")} == {"analytic"}
    assert methods["sketch"]["bytes_sent"]["site:1"] == 8 * (4 * k * d + 1)
    # under add/remove (the default) FPCA has no sound form: shown as skipped with the reason, never run otherwise
    code = main(["compare", "--dataset", "digits", "--sites", "4", "--methods", "fpca,sketch", "--seed", "0",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = json.loads(out)["methods"]
    assert set(rows["fpca"]) == {"kind", "skipped", "centering"} and "add/remove-one" in rows["fpca"]["skipped"]
    assert rows["sketch"]["privacy"]["neighbouring"] == "add/remove-one"
    assert methods["fpca"]["privacy"]["mechanism"] == "mod-sulq-streaming"
    assert methods["mod-sulq"]["privacy"]["mechanism"] == "mod-sulq-symmetric"
    assert methods["frequent-directions"]["privacy"]["epsilon"] == "inf"


def test_bench_streaming_reports_both_figures():
    out = streaming.run(n=3000, d=16, rank=8, block=50, k=4, sketch_rows=1000, sketch_k=2, sketch_multiples=(1, 2))
    assert set(out["fpca"]) == set(out["batch"]) == {"seconds", "peak_traced_bytes", "peak_anon_rss_bytes"}
    assert out["memory_ratio_traced"] < 1 and out["min_cosine"] > 0.99
    assert [row["m"] for row in out["sketch"]] == [32, 64]
    assert set(out["goals_met"]) == {"memory", "time"} and out["goals"] == {"memory_ratio": 0.05, "time_ratio": 3.0}
    json.dumps(out)


@pytest.mark.parametrize("args,match", [
    (["--rank", "0"], "Invalid value for '--rank'"),
])
def test_bench_streaming_bad_options(capsys, args, match):
    assert main(["bench", "streaming", *args]) != 0
    assert match in capsys.readouterr().err
