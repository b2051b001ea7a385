"""``dpdpca bench proofs``: one JSON object with the three ratios, measured and (above --full-up-to) extrapolated."""

from __future__ import annotations

import json

from dpdpca.cli import main


def test_bench_proofs_json(capsys):
    assert main(["bench", "proofs", "--key-bits", "512", "--insecure-test-key", "--d", "3", "--d", "5",
                 "--full-up-to", "3", "--measure-reps", "1", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["key_bits"] == 512 and [r["d"] for r in out["results"]] == [3, 5]
    full, ext = out["results"]
    assert not full["extrapolated"] and full["measured_repetitions"] == [41]
    assert ext["extrapolated"] and ext["measured_repetitions"] == [1, 3]
    for r in out["results"]:
        assert r["prove_over_encrypt"] == r["prove_s"] / r["encrypt_s"] > 0
        assert r["verify_over_intake"] == r["verify_s"] / r["intake_s"] > 0
        assert r["proof_over_share_bytes"] == r["proof_bytes"] / r["share_bytes"]
        # masks: 41 ciphertexts per share ciphertext, so the proof is larger than the share
        assert r["proof_bytes"] > 41 * r["ciphertexts"] * 128 and not r["goals_met"]["bytes"]
        assert set(r["proven_over_declared_bits"]) == {"R", "v"}
    assert main(["bench", "proofs", "--key-bits", "512", "--insecure-test-key", "--measure-reps", "3", "1"]) == 2
    assert "--measure-reps must be two counts" in capsys.readouterr().err


def test_bench_proofs_encryption_time_is_the_owners_wall_time_alone(monkeypatch):
    """encrypt_s is the owner's encrypt + precompute wall seconds; to_dict's cpu_s beside them is not added in."""
    from dpdpca.bench.proofs import measure
    from dpdpca.crypto import generate_keypair
    from dpdpca.timing import Timings

    original = Timings.to_dict

    def fixed(self):
        out = original(self)
        for party in [p for p in out["parties"] if p.startswith("owner:")]:
            out["parties"][party] = {"encrypt": 1.0, "precompute": 2.0}
            out["cpu_s"][party] = {"encrypt": 1.0, "precompute": 2.0}
        return out

    monkeypatch.setattr(Timings, "to_dict", fixed)
    pk, _ = generate_keypair(512, insecure_test_key=True)
    assert measure(3, key=pk, rows=5, reps=(1, 2))["encrypt_s"] == 3.0


def test_bench_proofs_reports_the_count_proof(capsys):
    """The exact count proof: its bits, times and bytes; in the add/remove share's totals, not in the centred one's."""
    from dpdpca.protocol.proofs import join_proofs

    for release in ("centred", "add-remove"):
        assert main(["bench", "proofs", "--key-bits", "512", "--insecure-test-key", "--d", "3", "--rows", "5",
                     "--release", release, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        r = out["results"][0]
        assert out["release"] == release and r["count_proof_in_share"] is (release == "add-remove")
        assert r["count_bits"] == 10  # max_rows_per_owner = 1000
        assert r["count_prove_s"] > 0 and r["count_verify_s"] > 0
        assert r["count_proof_bytes"] > 10 * 128  # one 1024-bit ciphertext per bit at least
        assert set(r["proven_over_declared_bits"]) == ({"R", "v", "N"} if release == "add-remove" else {"R", "v"})
        if release == "add-remove":
            assert r["prove_s"] > r["count_prove_s"] and r["verify_s"] > r["count_verify_s"]
            # the totals hold the count proof and the section's header (10 bytes, two 8-byte lengths)
            assert len(join_proofs(b"", b"")) == 26


def test_bench_proofs_exact_mode_beside_the_slack_mode(capsys):
    """--mode both: the exact mode's proofs timed in full on the same share, its ratios to the slack mode, the exact
    bit counts and the labelled extrapolation, and the load average."""
    assert main(["bench", "proofs", "--key-bits", "512", "--insecure-test-key", "--d", "2", "--rows", "5",
                 "--release", "add-remove", "--mode", "both", "--extrapolate-to", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    r = out["results"][0]
    e = r["exact"]
    # d = 2, max_rows_per_owner 1000, f = 16: R's diagonal spans B_R (42 bits), its off-diagonal 2 B_R (43),
    # v 2 B_v (27 each), N 1000 rows (10)
    assert e["bits"] == 2 * 42 + 43 + 2 * 27 + 10
    assert e["prove_s"] > 0 and e["verify_s"] > 0 and e["proof_bytes"] > e["bits"] * 128
    assert e["prove_over_slack"] == e["prove_s"] / r["prove_s"]
    x = out["exact_extrapolated"]
    assert x["from_d"] == 2 and "extrapolation" in x["note"]
    assert x["results"][0]["bits"] == 3 * 42 + 3 * 43 + 3 * 27 + 10
    assert x["results"][0]["prove_s"] == x["results"][0]["bits"] * e["prove_per_bit_s"]
    assert len(out["loadavg"]["before"]) == 3 and len(out["loadavg"]["after"]) == 3
