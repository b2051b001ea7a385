"""The crypto benchmark command runs end to end and reports every documented key (small key, tiny sizes)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from dpdpca.bench.crypto import command

KEYS = {"key_bits", "values", "phe_encrypt_values_per_s", "encrypt_values_per_s", "encrypt_ratio",
        "phe_decrypt_values_per_s", "decrypt_values_per_s", "decrypt_ratio", "aggregate_efficiency",
        "peak_rss_mb", "slots_per_ciphertext", "slot_bits"}


def test_bench_crypto_json_small_key():
    res = CliRunner().invoke(command, ["--quick", "--key-bits", "1024", "--insecure-test-key", "--d", "30", "--workers", "2", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert KEYS <= set(out)
    assert out["key_bits"] == 1024 and out["slot_bits_any"] == 80 and out["slots_per_ciphertext_any"] == 11  # wide (M only: v' has its own layout)
    # the headline: parameters declaring the add/remove release (no N**2 term, that release's allowance)
    assert (out["slot_bits"], out["slots_per_ciphertext"]) == (60, 17) and out["decrypt_ratio_any"] > 0
    assert out["slot_bits_plain"] == 160 and out["slots_per_ciphertext_plain"] == 6
    assert out["decrypt_ratio_plain"] > 0 and out["encrypt_ratio_plain"] > 0
    assert out["triangle_d"] == 30 and out["triangle_chunks_check"] is True
    assert out["parallel_workers"] == 2 and out["parallel_encrypt_speedup"] > 0
    assert out["peak_rss_mb"] > 0 and out["encrypt_ratio"] > 0 and out["aggregate_efficiency"] > 0


def test_bench_crypto_refuses_small_key_without_flag():
    res = CliRunner().invoke(command, ["--quick", "--key-bits", "1024"])
    assert res.exit_code != 0 and "insecure_test_key" in str(res.exception)
