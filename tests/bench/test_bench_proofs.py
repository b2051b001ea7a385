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
