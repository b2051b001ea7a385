"""A malicious data user's modulus: owners refuse a key anyone can factor (issue 24, item 5)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpdpca.cli import main
from dpdpca.crypto import PublicKey
from dpdpca.crypto.keys import derive_hs
from dpdpca.protocol.params import ProtocolParams


@pytest.fixture(scope="module")
def owner_files(tmp_path_factory):
    out = tmp_path_factory.mktemp("kv")
    assert main(["owner", "keygen", "--owner-id", "a", "--out-dir", str(out)]) == 0
    np.save(out / "rows.npy", np.full((3, 2), 0.3))
    return out


def _share(capsys, out, public: dict, *extra: str) -> tuple[int, str]:
    (out / "public.json").write_text(json.dumps(public))
    target = out / "share.msg"
    capsys.readouterr()
    code = main(["owner", "share", "--public", str(out / "public.json"), "--identity", str(out / "a.identity.json"),
                 "--data", str(out / "rows.npy"), "--out", str(target), *extra])
    err = capsys.readouterr().err
    assert target.exists() == (code == 0)
    return code, err


@pytest.mark.parametrize("make, match", [("3P", "no prime factor below 2^16"), ("9P", "no prime factor below 2^16"),
                                         ("prime", "product of two primes")])
def test_owner_refuses_a_2048_bit_modulus_anyone_can_factor(owner_files, capsys, make, match, prime_3mod4):
    """n = 3 P, 9 P or a prime, each 2048 bits, published with a valid-looking public.json: the owner exits 2
    with one line and writes nothing (an outsider could otherwise factor n and read the share)."""
    n = {"3P": 3 * prime_3mod4(2047, 11), "9P": 9 * prime_3mod4(2045, 11), "prime": prime_3mod4(2048, 12)}[make]
    assert n.bit_length() >= 2048
    public = ProtocolParams.create(PublicKey(n, derive_hs(n)), max_owners=2, max_rows_per_owner=10).to_json()
    for extra in ((), ("--insecure-test-key",)):  # the owner's flag never lifts the structural checks
        code, err = _share(capsys, owner_files, public, *extra)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert match in err, err


def test_owner_refuses_a_key_without_a_proof_or_with_a_foreign_one(owner_files, keypair, other_keypair, capsys):
    pk = keypair[0]
    params = ProtocolParams.create(pk, max_owners=2, max_rows_per_owner=10)
    public = params.to_json()
    assert "modulus_proof" in public
    bare = {k: v for k, v in public.items() if k != "modulus_proof"}
    code, err = _share(capsys, owner_files, bare)
    assert code == 2 and err.count("\n") == 1
    assert "key bits must be >= 2048" in err  # a 768-bit test key: the size policy comes first
    # with the owner's explicit consent to a test key: the missing proof is accepted, the structure still checked
    code, err = _share(capsys, owner_files, bare, "--insecure-test-key")
    assert code == 0, err
    (owner_files / "share.msg").unlink()
    foreign = {**public, "modulus_proof": other_keypair[0].to_json()["modulus_proof"]}
    code, err = _share(capsys, owner_files, foreign, "--insecure-test-key")
    assert code == 2 and err.count("\n") == 1 and "Paillier-Blum modulus proof" in err, err


def test_a_secure_key_without_a_proof_says_to_run_keygen_again(owner_files, capsys, prime_3mod4):
    """An old 2048-bit public.json (no modulus_proof) is refused with the advice, not accepted."""
    p, q = prime_3mod4(1024, 21), prime_3mod4(1024, 22)
    n = p * q
    public = ProtocolParams.create(PublicKey(n, derive_hs(n)), max_owners=2, max_rows_per_owner=10).to_json()
    assert "modulus_proof" not in public
    code, err = _share(capsys, owner_files, public)
    assert code == 2 and err.count("\n") == 1 and "run dpdpca keygen again" in err, err
