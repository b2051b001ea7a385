"""``dpdpca bench intake``: the proxy's intake beside the floor's operations alone (the speed goals live in the
benchmark; these tests check what it measures)."""

from __future__ import annotations

import json

import pytest

from dpdpca.bench import intake
from dpdpca.cli import main
from dpdpca.crypto import generate_keypair
from dpdpca.crypto.ciphertexts import to_fixed_bytes
from dpdpca.errors import AuthenticationError
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring


def test_bench_intake_smoke(capsys):
    assert main(["bench", "intake", "--owners", "2,4", "--repeats", "1", "--key-bits", "768",
                 "--insecure-test-key", "--json", "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["L"] == [2, 4] and result["workers"] == 2 and result["max_owners"] == 4
    assert set(result["intakes"]) == {"proxy", "floor_ops", "floor_ops_worker_reads"}
    floor = result["floor"]
    assert floor["ops"]["mulmod_s"] == result["ciphertexts_per_share"] > 0
    assert floor["ops"]["sha256_byte_s"] == result["share_bytes"]
    for r in result["intakes"].values():
        assert len(r["seconds"]) == 2 and all(s > 0 for s in r["seconds"])
        assert r["per_share_s"] == pytest.approx((r["seconds"][1] - r["seconds"][0]) / 2)
        if r["per_share_s"] > 0:
            assert r["fraction_of_floor"] == pytest.approx(floor["floor_s"] / r["per_share_s"])
    # the ceiling: the floor's work over that work plus reading each ciphertext, timed in the same run
    reading = result["ciphertexts_per_share"] * result["primitives"]["from_bytes_s"]
    assert result["ceiling"]["from_bytes_s"] == pytest.approx(reading) and reading > 0
    ceiling = result["ceiling"]["fraction_of_floor"]
    assert ceiling == pytest.approx(floor["work_s"] / (floor["work_s"] + reading)) and ceiling < 1
    # both kernels timed in one process, against the floor's work on one core (which is faster is the
    # benchmark's to say, not a test's: on 4 small shares a busy moment can swap them)
    cpu = result["one_process"]
    assert set(cpu) == {"floor_ops", "check_and_sum"}
    for r in cpu.values():
        assert r["cpu_s"] > 0 and r["fraction_of_floor"] == pytest.approx(floor["work_s"] / r["cpu_s"])
    table = intake.format_table(result)  # what the command prints without --json
    assert table.splitlines()[2].startswith("proxy") and "of floor" in table
    assert "in one process" in table and "ceiling: " in table


def test_the_floor_kernel_multiplies_every_ciphertext_of_every_share():
    """The kernel does the floor's multiplications for real, on the byte runs it is told, counted from each
    share's end (here before a trailer, after headers of different lengths, as owners' ids make them): its
    product is the ciphertexts' product modulo n**2; a bad signature is refused."""
    pk, _ = generate_keypair(512, insecure_test_key=True)
    width, n2 = pk.ciphertext_bytes, int(pk.nsquare)
    rows = [[(7 * s + k + 2) ** 40 % n2 for k in range(3)] for s in range(4)]
    shares = [b"head" * (s + 1) + to_fixed_bytes(row, width) + b"tail" for s, row in enumerate(rows)]
    signer = OwnerIdentity.generate("floor")
    message = b"m" * 200
    spec = {"modulus": str(n2), "width": width, "runs": [[3 * width + 4, 3 * width]],
            "keyring": OwnerKeyring.from_identities([signer]).to_json(), "owner": "floor",
            "message": message.hex(), "signature": signer.sign(message).hex()}
    taken, product = intake.floor_kernel(json.dumps(spec).encode(), shares)
    assert taken == 4
    assert product == to_fixed_bytes([a * b * c * d % n2 for a, b, c, d in zip(*rows)], width)
    spec["signature"] = signer.sign(b"other").hex()
    with pytest.raises(AuthenticationError):
        intake.floor_kernel(json.dumps(spec).encode(), shares)


def test_bench_intake_needs_two_values_of_L(capsys):
    assert main(["bench", "intake", "--owners", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpdpca: error: --owners must be a comma-separated list of at least two integers >= 2, "
                          "got '5'") and len(err.strip().splitlines()) == 1
