"""The protocol under the BFV scheme: the add/remove release exactly as under Paillier, and the checks it keeps."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

pytest.importorskip("tenseal", reason="the [lattice] extra (TenSEAL) is not installed")

from dpdpca.cli import main  # noqa: E402
from dpdpca.errors import InsecureKeyError, MessageError, ParameterError, ProtocolError  # noqa: E402
from dpdpca.protocol import DataUser, Proxy, ProtocolParams  # noqa: E402
from dpdpca.protocol.counts import ShareStatement, ciphertext_digest  # noqa: E402
from dpdpca.protocol.messages import Message  # noqa: E402
from dpdpca.protocol.runner import run_protocol  # noqa: E402
from dpdpca.protocol.sections import share_sections  # noqa: E402

BOUNDS = dict(max_owners=4, max_rows_per_owner=64, frac_bits=16, kappa=40, release="add-remove")


@pytest.fixture(scope="module")
def bfv_user(test_keyring):
    return DataUser.generate(scheme="bfv", owner_keys=test_keyring, **BOUNDS)


def _parts(unit_rows, seed=0, sizes=(30, 20, 25), d=5):
    rng = np.random.default_rng(seed)
    return [unit_rows(rng, n, d) for n in sizes]


@pytest.mark.parametrize("noise_by", ["proxy", "owners"])
def test_bfv_run_is_the_paillier_release_with_zero_integer_error(unit_rows, noise_by):
    parts = _parts(unit_rows)
    run = run_protocol(parts, n_components=2, epsilon=1.0, delta=1e-5, scheme="bfv", release="add-remove",
                       noise_by=noise_by, verify=True)
    assert run.verify == {"max_abs_integer_error": 0}
    assert run.result.params["release"] == "add-remove" and run.result.params["scheme"] == "bfv"
    assert run.result.params["ring_degree"] in (4096, 8192) and "key_bits" not in run.result.params
    assert run.result.privacy.neighbouring == "add/remove-one"
    # the noisy integers are decrypted exactly: the user's blocks minus the recorded noise are the true sums
    assert set(run.extra["noisy_blocks"]) == {"R", "v", "N"}


def test_bfv_public_json_carries_the_scheme(bfv_user):
    p = bfv_user.params
    obj = json.loads(json.dumps(p.to_json()))
    assert obj["kty"] == "DPDPCA-BFV" and obj["dpdpca_protocol"]["scheme"] == "bfv"
    assert obj["dpdpca_protocol"]["release"] == "add-remove"
    again = ProtocolParams.from_json(obj)
    assert again.scheme.name == "bfv" and again.layout == p.layout and again.key_fingerprint == p.key_fingerprint
    with pytest.raises(MessageError, match="scheme must be the key's scheme 'bfv', got 'paillier'"):
        ProtocolParams.from_json({**obj, "dpdpca_protocol": {**obj["dpdpca_protocol"], "scheme": "paillier"}})


def test_centred_release_is_paillier_only(bfv_user, unit_rows):
    with pytest.raises(ParameterError, match="release must be 'add-remove' with scheme 'bfv'.*Paillier-only"):
        ProtocolParams.create(bfv_user.params.public_key, **{**BOUNDS, "release": "centred"})
    with pytest.raises(ParameterError, match="Paillier-only"):
        run_protocol(_parts(unit_rows), n_components=2, scheme="bfv", release="centred")
    with pytest.raises(ParameterError, match="scheme must be one of"):
        run_protocol(_parts(unit_rows), n_components=2, scheme="rsa")


def test_bfv_share_in_a_paillier_session_is_refused_in_one_line(bfv_user, make_user, make_owner, unit_rows):
    paillier_user = make_user(release="add-remove")
    X = _parts(unit_rows)[0]
    bfv_share = make_owner(bfv_user.params, "alice", release="add-remove").share(X)
    paillier_share = make_owner(paillier_user.params, "alice", release="add-remove").share(X)
    with pytest.raises(MessageError, match="^share scheme must be 'paillier', the session key's, got 'bfv'$"):
        Proxy(paillier_user.params, paillier_user.owner_keys, release="add-remove").receive_share(bfv_share)
    with pytest.raises(MessageError, match="^share scheme must be 'bfv', the session key's, got 'paillier'$"):
        Proxy(bfv_user.params, bfv_user.owner_keys, release="add-remove").receive_share(paillier_share)


def test_bfv_replay_duplicate_and_single_release(bfv_user, make_owner, identity, unit_rows):
    p = bfv_user.params
    parts = _parts(unit_rows, seed=3)
    alice = make_owner(p, "alice", release="add-remove").share(parts[0])
    proxy = Proxy(p, bfv_user.owner_keys, quorum=2, release="add-remove")
    assert proxy.receive_share(alice) == "alice"
    with pytest.raises(ProtocolError, match="duplicate or replayed"):
        proxy.receive_share(alice)
    # bob signs alice's ciphertexts with his own key: identical BFV ciphertexts are refused under any id
    replay = _signed_as(alice, identity, p, "bob")
    with pytest.raises(ProtocolError, match="ciphertexts must be fresh"):
        proxy.receive_share(replay)
    # a tampered ciphertext section no longer matches the owner's signed digest
    m = Message.from_bytes(alice)
    sections = dict(m.sections)
    sections["R"] = sections["R"][:-1] + bytes([sections["R"][-1] ^ 1])
    tampered = Message(m.type, m.session, m.key_fingerprint, m.sender, m.meta, sections).to_bytes()
    with pytest.raises(Exception, match="cover these ciphertexts"):
        Proxy(p, bfv_user.owner_keys, release="add-remove").receive_share(tampered)
    proxy.receive_share(make_owner(p, "bob", release="add-remove").share(parts[1]))
    proxy.close_collection()
    out = proxy.finish(epsilon=1.0, delta=1e-5)
    with pytest.raises(ProtocolError, match="released once"):
        proxy.finish(epsilon=1.0, delta=1e-5)
    user = DataUser(bfv_user.private_key, p, owner_keys=bfv_user.owner_keys)
    user.finish(out, n_components=2)
    # a second, different release of the session (another proxy run over alice alone) is never decrypted
    other = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove")
    other.receive_share(alice)
    other.close_collection()
    with pytest.raises(ProtocolError, match="another digest|released once|one release"):
        user.finish(other.finish(epsilon=1.0, delta=1e-5), n_components=2)


def test_a_copy_with_a_plaintext_added_to_c0_is_refused_as_a_replay(bfv_user, make_owner, identity, unit_rows):
    """Bob takes alice's ciphertext, adds a plaintext of his own to c_0 (a valid encryption of her values plus his,
    counting her rows twice) and signs it: the replay key reads the mask part c_1, which the addition leaves alone,
    so the copy is refused.  A digest of the whole ciphertext would have let it through."""
    from dpdpca.crypto.lattice import BFVArray

    p = bfv_user.params
    alice = make_owner(p, "alice", release="add-remove").share(_parts(unit_rows, seed=3)[0])
    packed = BFVArray.from_bytes(Message.from_bytes(alice).section("R"), p.public_key)
    shifted = [[np.stack([(words[0] + np.uint64(1)) % level.column[0], words[1]]) for words in row]
               for level, row in zip(p.public_key.levels, packed.residues())]
    copy = BFVArray(p.public_key, packed.chunks, 0, packed.noise, None, packed.layout, packed.segments,
                    residues=shifted)
    assert copy.ciphertext_blobs() != packed.ciphertext_blobs() and copy.replay_keys() == packed.replay_keys()
    m = Message.from_bytes(alice)
    proxy = Proxy(p, bfv_user.owner_keys, quorum=2, release="add-remove")
    assert proxy.receive_share(alice) == "alice"
    with pytest.raises(ProtocolError, match="ciphertexts must be fresh"):
        proxy.receive_share(_signed_as(alice, identity, p, "bob", {**m.sections, "R": copy.to_bytes()}))
    assert proxy.receive_share(make_owner(p, "bob", release="add-remove").share(_parts(unit_rows, seed=4)[1])) == "bob"


def test_a_residue_at_or_above_its_prime_is_refused_in_one_line(bfv_user, make_owner, identity, unit_rows):
    """The proxy checks received ciphertexts in numpy, not through SEAL's loader: every residue must be below its
    prime (as SEAL would require), so a share carrying q_i itself, or 2**64 - 1, is refused naming the ciphertext,
    and the honest share still goes in."""
    from dpdpca.crypto.lattice import BFVArray

    p = bfv_user.params
    share = make_owner(p, "alice", release="add-remove").share(_parts(unit_rows, seed=13)[0])
    m = Message.from_bytes(share)
    packed = BFVArray.from_bytes(m.section("R"), p.public_key)
    for value in (int(p.public_key.levels[0].moduli[-1]), 2**64 - 1):
        rows = [[words.copy() for words in row] for row in packed.residues()]
        rows[0][0][1, -1, 7] = value  # c_1, the last data prime, one coefficient
        bad = BFVArray(p.public_key, packed.chunks, 0, packed.noise, None, packed.layout, packed.segments,
                       residues=rows)
        proxy = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove")
        with pytest.raises(MessageError, match=r"^section R: BFV batch ciphertext\[0\] must have every residue "
                                               r"below its prime, got one at or above it$"):
            proxy.receive_share(_signed_as(share, identity, p, "alice", {**m.sections, "R": bad.to_bytes()}))
    assert proxy.receive_share(share) == "alice"


def test_bfv_proxy_output_is_rerandomized(bfv_user, make_owner, unit_rows):
    """The released ciphertexts are not the owners' sum: a fresh encryption of 0 was added to each, then flooded.

    docs/threat-model.md: measured, not only declared.  With the secret key (SEAL's invariant noise budget, as the
    data user can) the release's noise has the flood's size 2**f, not the shares' (the header's bound alone would not
    show a missing flood); and release - aggregate is a proper ciphertext (c1 != 0), not the transparent
    (noise + flood, 0) that anyone who saw the owners' ciphertexts could read without the key."""
    import math

    import tenseal.sealapi  # noqa: F401  (registers SEAL's Modulus type: the primes are read below)

    p = bfv_user.params
    X = _parts(unit_rows, seed=4)[0]
    share = make_owner(p, "alice", release="add-remove").share(X)
    proxy = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove")
    proxy.receive_share(share)
    proxy.close_collection()
    agg = proxy._aggregate["R"].packed  # R, v and N: one packed stream
    msg = Message.from_bytes(proxy.finish(epsilon=1.0, delta=1e-5))
    released = msg.section("R2")
    assert msg.section("v2") == b"" and msg.section("N2") == b""
    owner_blobs = set(agg.ciphertext_blobs())
    from dpdpca.crypto.lattice import BFVArray

    out = BFVArray.from_bytes(released, p.public_key)
    assert owner_blobs.isdisjoint(out.ciphertext_blobs())
    from dpdpca.crypto.lattice_flood import flood_exponent

    fresh, m = p.public_key.params.fresh_noise, p.public_key.params.ring_degree * out.ciphertext_count
    before = agg.noise + 1 + fresh  # noise added, then a fresh zero
    # the zeros were made while collection was open (prepare), sized for max_owners shares, not this aggregate:
    # |e| <= 2**f with f = 40 + log2(M B_max) >= what this aggregate's own bound B needs
    f = flood_exponent((p.max_owners + 1) * fresh + fresh, m)
    assert f >= flood_exponent(before, m) >= 40 + 20
    assert out.noise == before + (2 << f) < p.public_key.params.noise_capacity
    # what the secret-key holder measures: budget = log2(q / (2 t |v|)) up to a bit, |v| ~ 2**f (the largest of
    # N uniform draws on [-2**f, 2**f)); without the flood |v| is the shares' and the fresh zero's, ~2**20
    sk = bfv_user.private_key
    for ctx, t, row in zip(sk._contexts, p.public_key.params.plain_moduli, out.per_prime_vectors()):
        q = math.prod(int(m.value()) for m in ctx.seal_context().data.first_context_data().parms().coeff_modulus())
        for vec in row:
            budget = ctx.decryptor().data.invariant_noise_budget(vec.ciphertext()[0])
            assert 1 <= budget <= math.log2(q / t) - f + 1, (budget, f)
    # release - aggregate = (DP noise as a plaintext) + the zeros: its c1 is the fresh encryption of 0's
    summand = BFVArray(p.public_key, agg.chunks, 0, 0, agg.per_prime_vectors(), None,
                       [(n, 0) for n, _ in out.segments])
    diff = out.take_out(summand)  # MessageError if c1 = 0 (transparent)
    assert not any(ct.is_transparent() for row in diff.per_prime_vectors() for vec in row for ct in vec.ciphertext())


def test_bfv_estimator_and_processes(unit_rows):
    from dpdpca.protocol import DPDPCA

    parts = _parts(unit_rows, seed=5, sizes=(20, 20))
    est = DPDPCA(n_components=2, epsilon=2.0, scheme="bfv", release="add-remove").fit(parts)
    assert est.components_.shape == (2, 5)
    run = run_protocol(parts, n_components=2, epsilon=2.0, scheme="bfv", release="add-remove", processes=True,
                       verify=True)
    assert run.verify == {"max_abs_integer_error": 0}


def test_cli_keygen_and_roles_with_bfv(tmp_path, unit_rows, capsys):
    rng = np.random.default_rng(6)
    for i, n in enumerate((30, 25)):
        np.save(tmp_path / f"x{i}.npy", unit_rows(rng, n, 4))
    assert main(["keygen", "--out-dir", str(tmp_path / "keys"), "--scheme", "bfv", "--max-owners", "2",
                 "--max-rows-per-owner", "50"]) == 0
    public = json.loads((tmp_path / "keys" / "public.json").read_text())
    assert public["dpdpca_protocol"]["scheme"] == "bfv"
    assert (tmp_path / "keys" / "private.json").stat().st_mode & 0o777 == 0o600
    for o in ("alice", "bob"):
        assert main(["owner", "keygen", "--owner-id", o, "--out-dir", str(tmp_path / "ids")]) == 0
    verify = [a for o in ("alice", "bob") for a in ("--owner-keys", str(tmp_path / f"ids/{o}.verify.json"))]
    capsys.readouterr()
    assert main(["owner", "prepare", "--public", str(tmp_path / "keys/public.json"), "--identity",
                 str(tmp_path / "ids/alice.identity.json"), "--d", "4"]) == 2  # BFV zeros never go to a file
    err = capsys.readouterr().err
    assert "scheme 'bfv': its owners make their encryptions of zero in memory" in err and len(err.splitlines()) == 1
    assert not list((tmp_path / "ids").glob("*randomness*"))
    for i, o in enumerate(("alice", "bob")):
        assert main(["owner", "share", "--public", str(tmp_path / "keys/public.json"), "--identity",
                     str(tmp_path / f"ids/{o}.identity.json"), "--data", str(tmp_path / f"x{i}.npy"),
                     "--out", str(tmp_path / f"s{i}.msg")]) == 0
    assert main(["proxy", "aggregate", "--public", str(tmp_path / "keys/public.json"), *verify, "--out-dir",
                 str(tmp_path / "state"), str(tmp_path / "s0.msg"), str(tmp_path / "s1.msg")]) == 0
    assert main(["proxy", "finish", "--state", str(tmp_path / "state"), "--epsilon", "100", "--delta", "1e-5",
                 "--out", str(tmp_path / "r.msg")]) == 0
    capsys.readouterr()
    assert main(["user", "finish", "--private", str(tmp_path / "keys/private.json"), *verify,
                 str(tmp_path / "r.msg"), "--components", "2", "--out", str(tmp_path / "pcs.npz"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["components_shape"] == [4, 2]
    assert main(["keygen", "--out-dir", str(tmp_path / "k2"), "--scheme", "bfv", "--release", "centred"]) == 2
    err = capsys.readouterr().err
    assert "Paillier-only" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "k2").exists()


def test_cli_run_scheme_bfv_verify(capsys):
    assert main(["run", "--scheme", "bfv", "--json", "--verify", "--owners", "3", "--components", "3",
                 "--release", "add-remove"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["verify"]["max_abs_integer_error"] == 0


def test_bfv_run_with_a_dask_engine_and_a_process_pool(unit_rows):
    """The compute engines do not carry BFV's operations (they run in the calling process); a run with them works."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    from dpdpca.crypto import local_process_pool

    parts = _parts(unit_rows, seed=7, sizes=(20, 25))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            run = run_protocol(parts, n_components=2, epsilon=2.0, scheme="bfv", release="add-remove",
                               executor=client, verify=True)
    assert run.verify == {"max_abs_integer_error": 0}
    with local_process_pool(2) as pool:
        run = run_protocol(parts, n_components=2, epsilon=2.0, scheme="bfv", release="add-remove", executor=pool,
                           verify=True)
    assert run.verify == {"max_abs_integer_error": 0}


def test_range_proofs_and_offline_factors_are_paillier_only(bfv_user, make_owner):
    p = bfv_user.params
    with pytest.raises(ParameterError, match="^range_proofs must be False with scheme 'bfv'"):
        make_owner(p, "alice", release="add-remove", range_proofs=True)
    with pytest.raises(ParameterError, match="^range_proofs must be False with scheme 'bfv'"):
        Proxy(p, bfv_user.owner_keys, release="add-remove", range_proofs=True)
    # no offline randomness in a file (owner prepare): a BFV owner's encryptions of zero stay in its memory
    assert make_owner(p, "alice", release="add-remove").precompute(5) is None


def test_bfv_owner_encryptions_of_zero_made_ahead_are_used_once_and_decrypt_exactly(bfv_user, make_owner, unit_rows):
    p = bfv_user.params
    X = _parts(unit_rows, seed=6)[0]
    owner, fresh = make_owner(p, "alice", release="add-remove"), make_owner(p, "bob", release="add-remove")
    owner.precompute(X.shape[1])
    zeros = owner._zeros
    assert "ready" in repr(zeros) and "vector" not in repr(zeros).lower()
    ahead, now = Message.from_bytes(owner.share(X)), Message.from_bytes(fresh.share(X))
    assert "used" in repr(zeros) and owner._zeros is None  # used once, then forgotten
    from dpdpca.crypto.lattice import BFVArray, decrypt_bfv

    arrays = [BFVArray.from_bytes(m.section("R"), p.public_key) for m in (ahead, now)]
    assert arrays[0].noise == arrays[1].noise == p.public_key.params.fresh_noise  # a fresh encryption's bound
    assert decrypt_bfv(bfv_user.private_key, arrays[0]) == decrypt_bfv(bfv_user.private_key, arrays[1])
    assert arrays[0].ciphertext_blobs() != arrays[1].ciphertext_blobs()
    owner.precompute(X.shape[1] + 1)  # made for another d: refused, never stretched
    with pytest.raises(ParameterError, match="^zeros must be unused and made for this key"):
        owner.share(X)


def _signed_as(share, identity, p, owner, sections=None):
    """``share`` sent and validly signed by ``owner`` under its own id, over ``sections`` (default its own
    ciphertexts as they are: another owner's, a replay; other sections: the owner lying about its share)."""
    m = Message.from_bytes(share)
    sections = m.sections if sections is None else sections
    st = ShareStatement.sign(identity(owner), session=p.session_id, key_fingerprint=p.key_fingerprint, d=m.meta["d"],
                             n_rows=None, ciphertext_sha256=ciphertext_digest(sections, share_sections("add-remove")))
    return Message(m.type, m.session, m.key_fingerprint, f"owner:{owner}",
                   {**m.meta, "owner_id": owner, "statement": st.to_json()}, sections).to_bytes()


def test_bfv_share_is_one_packed_stream_and_a_lying_layout_is_refused(bfv_user, make_owner, identity, unit_rows):
    from dpdpca.crypto.lattice import BFVArray, encrypt_segments

    p = bfv_user.params
    share = make_owner(p, "alice", release="add-remove").share(_parts(unit_rows, seed=6)[0])
    m = Message.from_bytes(share)
    # d = 5: R's upper triangle (15), v (5) and N (1) in one ciphertext per plaintext prime, v and N sections empty
    assert m.section("v") == b"" and m.section("N") == b""
    packed = BFVArray.from_bytes(m.section("R"), p.public_key)
    assert packed.chunks == (21,) and packed.ciphertext_count == len(p.public_key.params.plain_moduli)
    bounds = p.share_bounds("add-remove")
    assert packed.segments == ((15, bounds["R"]), (5, bounds["v"]), (1, bounds["N"]))
    proxy = Proxy(p, bfv_user.owner_keys, release="add-remove")
    # v sent apart as well as inside the pack
    extra = {**m.sections, "v": encrypt_segments(p.public_key, [([0] * 5, 0)]).to_bytes()}
    with pytest.raises(MessageError, match="section v must be empty"):
        proxy.receive_share(_signed_as(share, identity, p, "alice", extra))
    # segments cut elsewhere (16 + 4 + 1): the proxy would add v's noise to R
    cut = encrypt_segments(p.public_key, [([0] * 16, 1), ([0] * 4, 1), ([0], 1)])
    with pytest.raises(MessageError, match=r"segments must have lengths \[15, 5, 1\]"):
        proxy.receive_share(_signed_as(share, identity, p, "alice", {**m.sections, "R": cut.to_bytes()}))
    # a segment declared above the public bound of its section
    wide = encrypt_segments(p.public_key, [([0] * 15, 1), ([0] * 5, bounds["v"] + 1), ([0], 1)])
    with pytest.raises(MessageError, match="section v bound must be <= the declared"):
        proxy.receive_share(_signed_as(share, identity, p, "alice", {**m.sections, "R": wide.to_bytes()}))
    assert proxy.receive_share(share) == "alice"  # the honest share still goes in


def _with_header(section: bytes, **fields) -> bytes:
    """A packed BFV section with its JSON header's fields replaced (``DPBFV1``, length, header, ciphertexts)."""
    import struct

    (length,) = struct.unpack(">I", section[6:10])
    head = {**json.loads(section[10:10 + length]), **fields}
    new = json.dumps(head, separators=(",", ":")).encode()
    return section[:6] + struct.pack(">I", len(new)) + new + section[10 + length:]


def test_an_owner_declaring_more_noise_than_a_fresh_encryption_is_refused_and_locks_nobody_out(
        bfv_user, make_owner, identity, unit_rows):
    # the header's noise is the owner's word, and the proxy checks every later sum and its flooding against it:
    # declared near q/(2t), the next honest share would be refused; declared at a fraction, the flooding
    p = bfv_user.params
    fresh, capacity = p.public_key.params.fresh_noise, p.public_key.params.noise_capacity
    parts = _parts(unit_rows, seed=8)
    shares = {o: make_owner(p, o, release="add-remove").share(X) for o, X in zip(("alice", "bob", "c"), parts)}
    m = Message.from_bytes(shares["alice"])
    assert json.loads(m.section("R")[10:10 + int.from_bytes(m.section("R")[6:10], "big")])["noise"] == str(fresh)
    proxy = Proxy(p, bfv_user.owner_keys, quorum=3, release="add-remove")
    for noise in (capacity - 1, capacity >> 30, fresh + 1):
        lying = {**m.sections, "R": _with_header(m.section("R"), noise=str(noise))}
        with pytest.raises(MessageError, match=rf"^section R noise must be <= {fresh} half-units \(1 fresh "
                                               rf"encryption\(s\)\), got {noise}$"):
            proxy.receive_share(_signed_as(shares["alice"], identity, p, "alice", lying))
    assert [proxy.receive_share(shares[o]) for o in ("alice", "bob", "c")] == ["alice", "bob", "c"]
    proxy.close_collection()
    assert Message.from_bytes(proxy.finish(epsilon=1.0, delta=1e-5)).meta["owners"] == ["alice", "bob", "c"]


def test_a_declared_d_sizes_the_bfv_ring_to_one_share():
    """With d declared, the key's ring is chosen for a share's values (R's triangle, v, N), not per full ciphertext."""
    assert ProtocolParams.share_value_count(d=5) == 15 + 5 + 1 and ProtocolParams.share_value_count() is None
    from dpdpca.crypto.lattice import smallest_parameters
    from dpdpca.crypto.lattice_flood import RESERVE_BITS

    bounds = dict(max_owners=1000, max_rows_per_owner=5, min_epsilon=0.3, min_delta=1e-5, release="add-remove")
    key = DataUser.generate(scheme="bfv", d=57, **bounds).params.public_key.params
    want = smallest_parameters(ProtocolParams.release_value_bound(**bounds), additions=1002, reserve_bits=RESERVE_BITS,
                               values=1711)
    assert key == want and key.ring_degree == 8192  # the flooding room needs N = 8192 whatever the share's size


def test_bfv_pooled_intake_is_the_serial_intake(bfv_user, make_owner, identity, unit_rows):
    """Checked and summed in the pooled intake: the same owners, errors and aggregate ciphertexts as one by one.

    Alice's second share and Carol's replay of Alice's ciphertexts pass their worker's checks and are summed in,
    then refused by the bookkeeping and taken out again: the aggregate is the honest shares' sum, exactly.
    """
    from dpdpca.crypto import local_process_pool
    from dpdpca.errors import DpdpcaError

    p = bfv_user.params
    parts = _parts(unit_rows, seed=9, sizes=(10, 12, 14))
    alice, bob, carol = (make_owner(p, o, release="add-remove").share(X) for o, X in zip(("alice", "bob", "c"), parts))
    replay = _signed_as(alice, identity, p, "c")
    tampered = bytearray(bob)
    tampered[len(tampered) // 2] ^= 1
    batch = [alice, bob, alice, replay, bytes(tampered), carol]  # chunks of 4 and 2: both refusals in the first

    def outcome(o):
        return (type(o).__name__, str(o)) if isinstance(o, DpdpcaError) else o

    serial = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove")
    want = [outcome(Proxy._try(serial.receive_share, data)) for data in batch]
    with local_process_pool(2) as pool:
        pooled = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove", executor=pool)
        got = [outcome(o) for o in pooled.receive_shares(iter(batch))]
    assert got == want
    assert [o if isinstance(o, str) else o[0] for o in want] == ["alice", "bob", "ProtocolError", "ProtocolError",
                                                                 "MessageError", "c"]
    assert "duplicate" in want[2][1] and "fresh" in want[3][1]
    assert pooled.received == serial.received == ["alice", "bob", "c"] and pooled._running is not None
    # the process kernel's form (its sums as bytes: intake_bytes / intake_from_bytes), run here on the whole batch
    from dpdpca.protocol.intake import intake_kernel

    via_bytes = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove")
    verdicts, sums, _ = intake_kernel(via_bytes._intake_context().to_bytes(), None, batch)
    assert [outcome(o) for o in via_bytes._admit_chunk(verdicts, sums, batch)] == want
    for proxy in (serial, pooled, via_bytes):
        proxy.close_collection()
    ours, theirs = pooled._aggregate["R"].packed, serial._aggregate["R"].packed
    assert ours.ciphertext_blobs() == theirs.ciphertext_blobs()  # ring sums: the same ciphertexts, in any order
    assert ours.segments == theirs.segments and ours.noise == theirs.noise
    assert via_bytes._aggregate["R"].packed.ciphertext_blobs() == theirs.ciphertext_blobs()
    from dpdpca.crypto.lattice import decrypt_bfv

    assert decrypt_bfv(bfv_user.private_key, ours) == decrypt_bfv(bfv_user.private_key, theirs)


def _negated_by(share, identity, p, owner):
    """``owner``'s share whose ciphertexts are those of ``share`` negated (``a - (a + a) = -a``), signed by ``owner``.

    Added to ``share`` it cancels to ciphertexts whose mask part c1 is 0 (transparent): two colluding owners.
    """
    from dpdpca.crypto.lattice import BFVArray

    m = Message.from_bytes(share)
    packed = BFVArray.from_bytes(m.section("R"), p.public_key)
    negated = BFVArray(p.public_key, packed.chunks, 0, packed.noise,
                       [[a - (a + a) for a in row] for row in packed.per_prime_vectors()], packed.layout,
                       packed.segments)
    sections = {**m.sections, "R": negated.to_bytes()}
    st = ShareStatement.sign(identity(owner), session=p.session_id, key_fingerprint=p.key_fingerprint, d=m.meta["d"],
                             n_rows=None, ciphertext_sha256=ciphertext_digest(sections, share_sections("add-remove")))
    return Message(m.type, m.session, m.key_fingerprint, f"owner:{owner}",
                   {**m.meta, "owner_id": owner, "statement": st.to_json()}, sections).to_bytes()


@pytest.mark.parametrize("intake", ["serial", "pooled-one-chunk", "pooled-chunk-per-share"])
def test_colluding_owners_cancelling_ciphertexts_lose_one_share_not_the_session(bfv_user, make_owner, identity,
                                                                               unit_rows, intake):
    """Bob sends Alice's ciphertexts negated: their sum would be transparent (c1 = 0, SEAL refuses it).

    Bob's share, the one whose addition completes the cancellation, is refused with one line, in the serial
    intake, in a pool worker's chunk sum (one chunk) and in the main process's merge of chunk sums (a chunk per
    share); Alice and Carol are admitted and the aggregate is exactly theirs.
    """
    from dpdpca.crypto import local_process_pool
    from dpdpca.errors import DpdpcaError

    p = bfv_user.params
    parts = _parts(unit_rows, seed=11, sizes=(10, 12))
    alice, carol = (make_owner(p, o, release="add-remove").share(X) for o, X in zip(("alice", "c"), parts))
    bob = _negated_by(alice, identity, p, "bob")
    batch = [alice, bob, carol]
    honest = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove")
    honest.receive_share(alice)
    honest.receive_share(carol)
    honest.close_collection()
    with contextlib.ExitStack() as stack:
        if intake == "serial":
            proxy = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove")
            got = [Proxy._try(proxy.receive_share, data) for data in batch]
        else:
            pool = stack.enter_context(local_process_pool(2))
            proxy = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove", executor=pool)
            # expected=2 on 2 workers: chunks of one share, so the cancellation is met when chunk sums are merged
            got = proxy.receive_shares(iter(batch), expected=None if intake == "pooled-one-chunk" else 2)
    assert got[0] == "alice" and got[2] == "c"
    assert isinstance(got[1], MessageError) and isinstance(got[1], DpdpcaError)
    assert "transparent" in str(got[1]) and "\n" not in str(got[1])
    assert proxy.received == ["alice", "c"]
    proxy.close_collection()
    ours, theirs = proxy._aggregate["R"].packed, honest._aggregate["R"].packed
    assert ours.ciphertext_blobs() == theirs.ciphertext_blobs() and ours.segments == theirs.segments
    proxy.finish(epsilon=1.0, delta=1e-5)  # the session goes on to its release


def test_a_share_of_transparent_ciphertexts_is_refused_in_one_line(bfv_user, make_owner, identity, unit_rows):
    """A share whose ciphertexts have c1 = 0 (readable without the key; alone, a transparent aggregate that SEAL
    refuses to add the noise to) is refused when loaded; the owner's honest share still goes in."""
    from dpdpca.crypto.lattice import BFVArray

    p = bfv_user.params
    share = make_owner(p, "alice", release="add-remove").share(_parts(unit_rows, seed=12)[0])
    m = Message.from_bytes(share)
    packed = BFVArray.from_bytes(m.section("R"), p.public_key)
    rows = []  # (c0, 0), as large as an honest ciphertext: past the size check
    for row in packed.residues():
        rows.append([np.stack([np.full_like(words[0], 12345), np.zeros_like(words[1])]) for words in row])
    bare = BFVArray(p.public_key, packed.chunks, 0, packed.noise, None, packed.layout, packed.segments, residues=rows)
    proxy = Proxy(p, bfv_user.owner_keys, quorum=1, release="add-remove")
    with pytest.raises(MessageError, match=r"^section R: BFV batch ciphertext\[0\] must have a nonzero mask part c1, "
                                           r"got c1 = 0 \(a transparent ciphertext\)$"):
        proxy.receive_share(_signed_as(share, identity, p, "alice", {**m.sections, "R": bare.to_bytes()}))
    assert proxy.receive_share(share) == "alice"


def test_owner_refuses_a_transparent_public_key_in_one_line(bfv_user, make_owner, transparent_bfv_key, unit_rows,
                                                          tmp_path, capsys):
    # the data user publishes a key made from s = 0: every share would decrypt under the public key 0
    evil = transparent_bfv_key(bfv_user.params.to_json(), "0")
    params = ProtocolParams.from_json(json.loads(json.dumps(evil)))  # loads: parameters and contexts as declared
    line = ("^BFV public key must not be transparent \\(context 0's encryptions decrypt under the publicly known "
            "secret key 0\\), got one that does$")
    with pytest.raises(InsecureKeyError, match=line):
        make_owner(params, "alice", release="add-remove", insecure_test_key=False)
    one = ProtocolParams.from_json(json.loads(json.dumps(transparent_bfv_key(bfv_user.params.to_json(), "1x^3"))))
    with pytest.raises(InsecureKeyError, match="decrypt under the publicly known secret key x\\^3\\), got one"):
        make_owner(one, "alice", release="add-remove")
    # the CLI owner: exit 2, one line, no share written
    (tmp_path / "public.json").write_text(json.dumps(evil))
    np.save(tmp_path / "x.npy", _parts(unit_rows)[0])
    assert main(["owner", "keygen", "--owner-id", "alice", "--out-dir", str(tmp_path / "ids")]) == 0
    capsys.readouterr()
    assert main(["owner", "share", "--public", str(tmp_path / "public.json"), "--identity",
                 str(tmp_path / "ids/alice.identity.json"), "--data", str(tmp_path / "x.npy"),
                 "--out", str(tmp_path / "s.msg")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "must not be transparent" in err and "secret key 0)" in err
    assert not (tmp_path / "s.msg").exists()


@pytest.mark.parametrize("eps_ahead", [1.0, 0.5])
def test_noise_drawn_ahead_rides_in_the_release_zeros_exactly_and_only_for_its_setting(bfv_user, make_owner,
                                                                                     unit_rows, eps_ahead):
    """The proxy folds the noise it drew while collecting into the release's zeros made ahead, so the release
    adds one ciphertext: it decrypts to the owners' sums plus exactly the noise reported.  Drawn for another
    setting (epsilon 0.5, released at 1), those zeros are dropped and a fresh draw is released instead, exactly
    too: noise made for one setting never reaches another's release."""
    from dpdpca.crypto.lattice import BFVArray, decrypt_bfv

    p, sk = bfv_user.params, bfv_user.private_key
    shares = [make_owner(p, o, release="add-remove").share(x)
              for o, x in zip(("alice", "bob"), _parts(unit_rows, seed=21))]
    proxy = Proxy(p, bfv_user.owner_keys, quorum=2, release="add-remove", record_noise_for_testing=True)
    proxy.prepare(5, epsilon=eps_ahead, delta=1e-5)
    assert "noise folded in" in repr(proxy._release_zeros)  # both made ahead, and combined
    drawn = proxy._ready_noise[1]
    for s in shares:
        proxy.receive_share(s)
    proxy.close_collection()
    out = Message.from_bytes(proxy.finish(epsilon=1.0, delta=1e-5))
    released = decrypt_bfv(sk, BFVArray.from_bytes(out.section("R2"), p.public_key))
    owners = [decrypt_bfv(sk, BFVArray.from_bytes(Message.from_bytes(s).section("R"), p.public_key)) for s in shares]
    noise = proxy.noise_blocks_for_testing_
    flat = [int(x) for k in ("R", "v", "N") for x in noise[k]]
    assert released == [a + b + e for a, b, e in zip(*owners, flat)]
    assert (noise is drawn) == (eps_ahead == 1.0)
    assert proxy._release_zeros is None and proxy._folded is None  # used or dropped, never kept
