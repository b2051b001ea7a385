"""Owners' range proofs in the protocol: honest shares pass, a poisoned or unproved share is refused and its owner
excluded, serially and on the proxy's pool, and the privacy report says whether proofs were checked."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from dpdpca.crypto import EncryptedArray, local_process_pool
from dpdpca.crypto.rangeproof import ProverBase, SectionWitness, encrypt_for_proof
from dpdpca.errors import AuthenticationError, DpdpcaError, ProofError
from dpdpca.protocol import Proxy
from dpdpca.protocol.counts import ShareStatement, ciphertext_digest
from dpdpca.protocol.releases import as_release
from dpdpca.protocol.messages import Message, MessageType
from dpdpca.protocol.proofs import PROOF_SECTION, PROOF_SIGNATURE, prove_share, sign_proof
from dpdpca.protocol.runner import run_protocol


@pytest.fixture(scope="module")
def pool():
    with local_process_pool(2) as ex:
        yield ex


def _poisoned_share(p, identity, owner_id, d, *, scale, n_rows=3, release="centred", proof_bounds=None):
    """A share whose R is ``scale`` times the legitimate maximum, encrypted, signed and 'proved' by its owner.

    The owner runs the honest prover against *its own* (inflated) declared bounds: the best a
    cheater can do without the proof's slack.  ``proof_bounds`` overrides the bounds it proves.
    """
    bounds = p.share_bounds(release)
    big = bounds["R"] * scale
    shapes = as_release(release).share_chunks(d, p.layout.slots)
    m = {name: sum(c) for name, c in shapes.items()}
    values = {name: ([big] if name == "R" else [1]) * m[name] for name in shapes}
    base = ProverBase.draw(p.public_key)
    arrays, wits = {}, {}
    for name, chunks in shapes.items():
        arrays[name], exps = encrypt_for_proof(base, values[name], layout=p.layout, chunks=chunks,
                                               bound=max(bounds["v" if name == "vwin" else name], big
                                                         if name == "R" else 0))
        wits[name] = SectionWitness(values[name], exps)
        # the header declares the public bound (a declaration only: nothing in it is checked against the values)
        arrays[name] = EncryptedArray(base.public_key, p.layout, arrays[name].chunks,
                                      bounds["v" if name == "vwin" else name], arrays[name].ciphertexts)
    sections = {name: arr.to_bytes() for name, arr in arrays.items()}
    digest = ciphertext_digest(sections, as_release(release).sections)
    st = ShareStatement.sign(identity(owner_id), session=p.session_id, key_fingerprint=p.key_fingerprint, d=d,
                             n_rows=n_rows, ciphertext_sha256=digest)

    class _Inflated:  # the cheater's own idea of the public parameters
        def __getattr__(self, name):
            return getattr(p, name)

        def share_bounds(self, release="centred"):
            return proof_bounds or {k: max(b, big) for k, b in bounds.items()}

    sections[PROOF_SECTION] = prove_share(base, _Inflated(), release, arrays, wits, owner_id=owner_id, d=d,
                                          digest=digest)
    meta = {"owner_id": owner_id, "d": d, "statement": st.to_json(),
            "declared_bounds": {k: str(b) for k, b in bounds.items()},
            PROOF_SIGNATURE: sign_proof(identity(owner_id), p, d=d, digest=digest, proof=sections[PROOF_SECTION])}
    return Message(MessageType.OWNER_SHARE, p.session_id, p.key_fingerprint, f"owner:{owner_id}", meta=meta,
                   sections=sections).to_bytes()


@pytest.mark.parametrize("release, processes", [("centred", False), ("add-remove", False), ("centred", True)])
def test_honest_proved_shares_are_accepted_and_the_release_is_exact(unit_rows, release, processes):
    rng = np.random.default_rng(5)
    parts = [unit_rows(rng, 4, 3) for _ in range(3)]
    run = run_protocol(parts, n_components=2, epsilon=1.0, delta=1e-5, key_bits=768, insecure_test_key=True,
                       verify=True, range_proofs=True, release=release, processes=processes)
    assert sorted(run.owners_present) == ["1", "2", "3"]
    assert run.verify is not None and run.verify["max_abs_integer_error"] == 0
    assert "range proofs: on" in run.result.privacy.notes
    off = run_protocol(parts, n_components=2, epsilon=1.0, delta=1e-5, key_bits=768, insecure_test_key=True,
                       release=release)
    assert "range proofs: off" in off.result.privacy.notes


def test_a_poisoned_share_is_refused_named_logged_and_its_owner_excluded(make_user, make_owner, identity, caplog):
    """R scaled 10^5 past its legitimate maximum, proved for the owner's own inflated bounds (not the public
    statement): refused before aggregating.  (A cheater crafting its masks for the public statement gets up to the
    proven bound through: docs/threat-model.md and test_crypto_rangeproof.py's slack test.)"""
    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=2, range_proofs=True, release="centred")
    good = [make_owner(p, oid, range_proofs=True, release="centred").share(np.full((3, 3), 0.3))
            for oid in ("1", "2")]
    bad = _poisoned_share(p, identity, "3", 3, scale=10**5)
    assert proxy.receive_share(good[0]) == "1"
    with caplog.at_level(logging.WARNING, logger="dpdpca.proxy"):
        with pytest.raises(ProofError, match=r"^share of owner '3' must carry a valid range proof, got: "):
            proxy.receive_share(bad)
    assert "owner '3'" in caplog.text and "excluded" in caplog.text
    assert list(proxy.excluded_) == ["3"]
    # the excluded owner cannot come back with an honest share in this session
    with pytest.raises(ProofError, match="'3' is excluded from this session"):
        proxy.receive_share(make_owner(p, "3", range_proofs=True, release="centred").share(np.full((3, 3), 0.3)))
    assert proxy.receive_share(good[1]) == "2"
    proxy.close_collection()
    assert proxy.owners_ == ["1", "2"]
    out = proxy.finish(epsilon=1.0, delta=1e-5)
    note = Message.from_bytes(out).meta["privacy"]["notes"]
    assert "range proofs: on" in note and "excluded owners: 3" in note


def test_unproved_shares_and_proofs_moved_between_shares_are_refused(make_user, make_owner, identity, owner_signed):
    """An unproved share is refused (its owner not excluded: nothing shows the owner, not someone on the way,
    left the proof out); an owner signing another share's proof as its own is refused and excluded."""
    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="centred")
    with pytest.raises(AuthenticationError, match=r"^share of owner '1' must carry its range proof signed by its "
                                                  r"owner, got no 'rangeproof' section"):
        proxy.receive_share(make_owner(p, "1", release="centred").share(np.full((3, 3), 0.3)))
    a = Message.from_bytes(make_owner(p, "2", range_proofs=True, release="centred").share(np.full((3, 3), 0.3)))
    b = Message.from_bytes(make_owner(p, "4", range_proofs=True, release="centred").share(np.full((3, 3), -0.2)))
    moved = owner_signed(b, identity(b.meta["owner_id"]), p, **{PROOF_SECTION: a.sections[PROOF_SECTION]})
    with pytest.raises(ProofError, match="owner '4'"):
        proxy.receive_share(moved)
    assert sorted(proxy.excluded_) == ["4"]
    # a proxy without range proofs takes the same unproved share (the default)
    plain = make_owner(p, "5", release="centred").share(np.full((3, 3), 0.3))
    assert Proxy(p, user.owner_keys, quorum=1, release="centred").receive_share(plain) == "5"


def test_a_proved_share_sent_by_another_owner_or_in_a_later_session_is_refused_by_its_proof(make_user, make_owner,
                                                                                           identity, sent_as):
    """docs/threat-model.md: the proofs are bound to their owner and session, not only to the ciphertexts.  Bob sends
    alice's proved share (her ciphertexts and proof under his own signatures) to a proxy that has not seen hers, so no
    replay check can fire; in a later session under the same key the keyring lists someone else as 'alice' (an id is
    a name in one session's keyring), who sends her share again.  Each is refused by the proof alone."""
    from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring

    user = make_user()
    p = user.params
    share = make_owner(p, "alice", range_proofs=True, release="centred").share(np.full((3, 3), 0.3))
    msg = Message.from_bytes(share)
    proxy = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="centred")
    with pytest.raises(ProofError, match=r"^share of owner 'bob' must carry a valid range proof, got: range proof"):
        proxy.receive_share(sent_as(msg, identity("bob"), p))
    assert list(proxy.excluded_) == ["bob"]
    assert proxy.receive_share(share) == "alice"  # her own share, first from her
    later = make_user().params
    assert later.key_fingerprint == p.key_fingerprint and later.session_id != p.session_id
    other = OwnerIdentity.generate("alice")
    proxy = Proxy(later, OwnerKeyring.from_identities([other]), quorum=1, range_proofs=True, release="centred")
    with pytest.raises(ProofError, match=r"^share of owner 'alice' must carry a valid range proof, got: range proof"):
        proxy.receive_share(sent_as(msg, other, later))


def _rerandomized_copy(msg, p):
    """The sections of ``msg`` (a slack-proved share) with every ciphertext times ``h**delta`` (``h`` the owner's DJN
    base, public in its proof: fresh ciphertexts of the same values) and the proof's combined response ``Z`` moved by
    ``sum c_tk e_t delta_k`` to match.  The proof's equations then hold for the new ciphertexts with the old
    challenges, so only the challenges' binding to the ciphertexts and to the owner's context can refuse it."""
    import dataclasses
    import secrets

    from dpdpca.crypto import rangeproof as rp
    from dpdpca.protocol import proofs
    from dpdpca.protocol.sections import load_share_arrays

    release, d, pk = msg.meta["release"], msg.meta["d"], p.public_key
    range_proof, count = proofs.split_proofs(msg.sections[PROOF_SECTION])
    pf = rp.RangeProof.from_bytes(range_proof, pk)
    arrays = load_share_arrays(msg, p, d, owners=1, release=release)
    secs = proofs.proof_sections(p, release, arrays)
    context = proofs.proof_context(p, owner_id=msg.meta["owner_id"], d=d, release=release,
                                   digest=msg.meta["statement"]["ciphertext_sha256"])
    geom = rp.ProofGeometry.of(secs)
    d1 = rp._h1(context, pk, geom, secs, [pf.base, pf.root_commit, pf.gamma_commit], pf.masks)
    es, _ = rp._challenges(d1, geom.repetitions)
    coeffs = rp._coefficients(d1, pf.responses, geom.repetitions * geom.ciphertexts)
    deltas = [secrets.randbits(32) + 1 for _ in range(geom.ciphertexts)]
    factors = iter([pow(pf.base, delta, pk.nsquare) for delta in deltas])
    sections = {name: EncryptedArray(pk, arr.layout, arr.chunks, arr.bound,
                                     [int(c) * next(factors) % pk.nsquare for c in arr.ciphertexts]).to_bytes()
                for name, arr in arrays.items()}
    z = pf.combined + sum(coeffs[t * geom.ciphertexts + k] * delta for t in range(geom.repetitions) if es[t]
                          for k, delta in enumerate(deltas))
    sections[PROOF_SECTION] = proofs.join_proofs(dataclasses.replace(pf, combined=z).to_bytes(pk), count)
    return sections


def test_a_rerandomized_copy_of_a_proved_share_is_refused_by_its_proof(make_user, make_owner, identity, sent_as):
    """docs/threat-model.md: bob multiplies every ciphertext of alice's share by h**delta and moves her proof's
    response to match (:func:`_rerandomized_copy`): fresh ciphertexts, so the replay check passes them, of her
    values under her proof.  The proof's challenges hash the ciphertexts and her context: refused, bob excluded."""
    user = make_user()
    p = user.params
    share = make_owner(p, "alice", range_proofs=True, release="centred").share(np.full((3, 3), 0.3))
    msg = Message.from_bytes(share)
    proxy = Proxy(p, user.owner_keys, quorum=2, range_proofs=True, release="centred")
    assert proxy.receive_share(share) == "alice"
    copy = sent_as(msg, identity("bob"), p, **_rerandomized_copy(msg, p))
    with pytest.raises(ProofError, match=r"^share of owner 'bob' must carry a valid range proof, got: range proof"):
        proxy.receive_share(copy)
    assert list(proxy.excluded_) == ["bob"] and proxy.received == ["alice"]


def test_a_cheater_proving_the_public_bounds_for_an_inflated_share_is_refused(make_user, identity):
    """Proving the public bounds while R is far beyond them: the honest prover refuses; a forced proof fails."""
    user = make_user()
    p = user.params
    from dpdpca.errors import OverflowRiskError

    with pytest.raises(OverflowRiskError, match="must satisfy"):
        _poisoned_share(p, identity, "3", 3, scale=10**5, proof_bounds=p.share_bounds("centred"))


def test_the_pool_intake_refuses_and_excludes_the_same_owner(make_user, make_owner, identity, pool):
    user = make_user()
    p = user.params
    batch = [make_owner(p, "1", range_proofs=True, release="centred").share(np.full((3, 3), 0.3)),
             _poisoned_share(p, identity, "3", 3, scale=10**5),
             make_owner(p, "2", range_proofs=True, release="centred").share(np.full((3, 3), -0.3))]
    serial = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="centred")
    want = [Proxy._try(serial.receive_share, data) for data in batch]
    parallel = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, executor=pool, release="centred")
    got = parallel.receive_shares(iter(batch), expected=3)
    assert [type(o).__name__ for o in got] == [type(o).__name__ for o in want] == ["str", "ProofError", "str"]
    assert str(got[1]) == str(want[1])
    assert parallel.excluded_.keys() == serial.excluded_.keys() == {"3"}
    serial.close_collection()
    parallel.close_collection()
    for name in as_release("centred").sections:
        assert parallel._aggregate[name].ciphertexts == serial._aggregate[name].ciphertexts


def test_the_proxy_state_keeps_the_range_proof_setting(make_user, make_owner, identity):
    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="centred")
    proxy.receive_share(make_owner(p, "1", range_proofs=True, release="centred").share(np.full((3, 3), 0.3)))
    with pytest.raises(ProofError):
        proxy.receive_share(_poisoned_share(p, identity, "3", 3, scale=2))
    proxy.close_collection()
    back = Proxy.from_state(p, user.owner_keys, proxy.state_bytes())
    assert back.range_proofs and list(back.excluded_) == ["3"]
    assert "excluded owners: 3" in back.proof_note()


def test_role_commands_and_run_take_range_proofs(tmp_path, capsys):
    """owner share / proxy aggregate / proxy finish / user finish --range-proofs, a poisoned share refused with one
    line naming its owner while the session goes on, and dpdpca run --range-proofs."""
    from dpdpca.cli import main
    from dpdpca.protocol.identity import OwnerIdentity
    from dpdpca.protocol.params import ProtocolParams

    key = ["--key-bits", "768", "--insecure-test-key"]
    assert main(["keygen", "--out-dir", str(tmp_path / "keys"), *key, "--max-owners", "3",
                 "--max-rows-per-owner", "20", "--release", "centred"]) == 0
    for oid in ("1", "2", "3"):
        assert main(["owner", "keygen", "--owner-id", oid, "--out-dir", str(tmp_path / "ids")]) == 0
    rng = np.random.default_rng(1)
    for oid in ("1", "2"):
        X = rng.normal(size=(6, 3))
        np.save(tmp_path / f"{oid}.npy", 0.9 * X / np.linalg.norm(X, axis=1, keepdims=True))
        assert main(["owner", "share", "--public", str(tmp_path / "keys/public.json"), "--identity",
                     str(tmp_path / f"ids/{oid}.identity.json"), "--data", str(tmp_path / f"{oid}.npy"),
                     "--insecure-test-key", "--release", "centred", "--range-proofs",
                     "--out", str(tmp_path / f"{oid}.msg")]) == 0
    import json as _json

    params = ProtocolParams.from_json(_json.loads((tmp_path / "keys/public.json").read_text()), insecure_test_key=True)
    mallory = OwnerIdentity.load(str(tmp_path / "ids/3.identity.json"))
    (tmp_path / "3.msg").write_bytes(_poisoned_share(params, lambda _oid: mallory, "3", 3, scale=10**3))
    verify = [a for o in ("1", "2", "3") for a in ("--owner-keys", str(tmp_path / f"ids/{o}.verify.json"))]
    capsys.readouterr()
    assert main(["proxy", "aggregate", "--insecure-test-key", "--public", str(tmp_path / "keys/public.json"), *verify, "--release",
                 "centred", "--quorum", "2", "--range-proofs", "--out-dir", str(tmp_path / "state"),
                 *(str(tmp_path / f"{o}.msg") for o in ("1", "3", "2"))]) == 0
    out = capsys.readouterr()
    assert "aggregated 2 signed shares (1, 2)" in out.out
    assert out.err.count("refused owner 3: share of owner '3' must carry a valid range proof") == 1
    assert main(["proxy", "finish", "--insecure-test-key", "--state", str(tmp_path / "state"), "--epsilon", "10", "--delta", "1e-5",
                 "--no-range-proofs", "--out", str(tmp_path / "r.msg")]) == 2
    assert "--range-proofs must match the aggregated state" in capsys.readouterr().err
    assert main(["proxy", "finish", "--insecure-test-key", "--state", str(tmp_path / "state"), "--epsilon", "10", "--delta", "1e-5",
                 "--range-proofs", "--out", str(tmp_path / "r.msg")]) == 0
    capsys.readouterr()
    assert main(["user", "finish", "--insecure-test-key", "--private", str(tmp_path / "keys/private.json"), *verify, "--components", "2",
                 "--range-proofs", "--out", str(tmp_path / "pcs.npz"), "--json", str(tmp_path / "r.msg")]) == 0
    notes = _json.loads(capsys.readouterr().out)["privacy"]["notes"]
    assert "range proofs: on" in notes and "excluded owners: 3" in notes
    # a user that requires proofs refuses a release made without them
    assert main(["proxy", "aggregate", "--insecure-test-key", "--public", str(tmp_path / "keys/public.json"), *verify, "--release",
                 "centred", "--out-dir", str(tmp_path / "state2"), str(tmp_path / "1.msg"),
                 str(tmp_path / "2.msg")]) == 0
    assert main(["proxy", "finish", "--insecure-test-key", "--state", str(tmp_path / "state2"), "--epsilon", "10", "--delta", "1e-5",
                 "--out", str(tmp_path / "r2.msg")]) == 0
    capsys.readouterr()
    assert main(["user", "finish", "--insecure-test-key", "--private", str(tmp_path / "keys/private.json"), *verify, "--components", "2",
                 "--range-proofs", "--ledger", str(tmp_path / "other-ledger.json"), "--out",
                 str(tmp_path / "pcs2.npz"), str(tmp_path / "r2.msg")]) == 2
    err = capsys.readouterr().err
    assert "must say the proxy checked the owners' range proofs" in err and err.count("\n") == 1
    assert not (tmp_path / "pcs2.npz").exists()
    assert main(["run", *key, "--owners", "2", "--components", "2", "--json", "--range-proofs",
                 "--max-owners", "2"]) == 0
    assert "range proofs: on" in _json.loads(capsys.readouterr().out)["privacy"]["notes"]


@pytest.mark.parametrize("release, d, fits", [("centred", 64, True), ("centred", 784, False),
                                              ("add-remove", 64, False)])
def test_limit_the_proven_bound_against_the_slot_layout(keypair, release, d, fits):
    """docs/threat-model.md: with slots sized for honest shares, one cheater at the proven bound S still fits the
    centred release's final slot at d = 64 (10 owners of 6000 rows), not at d = 784 nor in the add/remove layout."""
    from dpdpca.crypto.rangeproof import ProofGeometry, ProofSection
    from dpdpca.protocol.params import ProtocolParams

    p = ProtocolParams.create(keypair[0], max_owners=10, max_rows_per_owner=6000, release=release)
    rel = as_release(release)
    bounds = p.share_bounds(release)
    secs = [ProofSection(name, [1] * len(c), c, p.layout.slot_bits, bounds["v" if name == "vwin" else name])
            for name, c in rel.share_chunks(d, p.layout.slots).items()]
    s_r = ProofGeometry.of(secs).proven_bounds["R"]
    one_cheater = s_r + 9 * bounds["R"] + p.noise_allowance
    assert (one_cheater <= p.layout.max_abs) is fits


def test_a_negative_row_count_in_the_clear_is_refused(make_user, identity):
    """Centred release: the count travels signed in the clear and the intake refuses one outside [1, max]."""
    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="centred")
    with pytest.raises(DpdpcaError, match="-1000"):
        proxy.receive_share(_poisoned_share(p, identity, "3", 3, scale=1, n_rows=-1000))


def _count_share(p, identity, owner_id, d, *, n_value, claimed_rows=None, claimed_value=None, noise="none"):
    """An add/remove share of zeros whose encrypted count is ``n_value`` (at scale 2**2f), with an honest range proof
    (``n_value`` is within the declared N bound, so the slack proof passes) and a count proof made by the honest
    prover told the count is ``claimed_rows`` (it cannot check the ciphertext: the relation to C_N is the lie)."""
    from dpdpca.crypto.bitproof import prove_interval
    from dpdpca.crypto.rangeproof import prove_ranges, verify_ranges
    from dpdpca.protocol.proofs import count_statement, join_proofs, proof_context, proof_sections

    release = "add-remove"
    bounds = p.share_bounds(release)
    shapes = as_release(release).share_chunks(d, p.layout.slots)
    values = {name: ([n_value] if name == "N" else [0] * sum(c)) for name, c in shapes.items()}
    base = ProverBase.draw(p.public_key)
    arrays, wits = {}, {}
    for name, chunks in shapes.items():
        arrays[name], exps = encrypt_for_proof(base, values[name], layout=p.layout, chunks=chunks,
                                               bound=bounds[name])
        wits[name] = SectionWitness(values[name], exps)
    sections = {name: arr.to_bytes() for name, arr in arrays.items()}
    digest = ciphertext_digest(sections, as_release(release).sections)
    st = ShareStatement.sign(identity(owner_id), session=p.session_id, key_fingerprint=p.key_fingerprint, d=d,
                             n_rows=None, ciphertext_sha256=digest, noise=noise)
    ctx = proof_context(p, owner_id=owner_id, d=d, release=release, digest=digest)
    secs = proof_sections(p, release, arrays)
    rng = prove_ranges(base, secs, [wits[s.name] for s in secs], context=ctx)
    verify_ranges(p.public_key, rng, secs, context=ctx)  # the slack proof alone accepts this count
    cst = count_statement(p, arrays["N"].ciphertexts[0], d=d, noise=noise)
    claimed = claimed_value if claimed_value is not None else claimed_rows << (2 * p.frac_bits)
    count = prove_interval(base, cst, value=claimed, exponent=wits["N"].exponents[0], context=ctx)
    sections[PROOF_SECTION] = join_proofs(rng.to_bytes(p.public_key), count.to_bytes(p.public_key, cst))
    meta = {"owner_id": owner_id, "d": d, "statement": st.to_json(), "release": release,
            "declared_bounds": {k: str(b) for k, b in bounds.items()},
            PROOF_SIGNATURE: sign_proof(identity(owner_id), p, d=d, digest=digest, proof=sections[PROOF_SECTION])}
    return Message(MessageType.OWNER_SHARE, p.session_id, p.key_fingerprint, f"owner:{owner_id}", meta=meta,
                   sections=sections).to_bytes()


@pytest.mark.parametrize("rows", [-1, -1000, 65])
def test_a_row_count_outside_zero_to_max_passes_the_slack_proof_but_not_the_count_proof(make_user, identity, rows):
    """docs/threat-model.md: the add/remove release's encrypted N (max_rows_per_owner = 64 here) is proved exactly;
    -1, -1000 and max + 1 rows pass the slack range proof and are refused, named, by the count proof."""
    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="add-remove")
    value = rows << (2 * p.frac_bits)
    assert abs(value) <= p.share_bounds("add-remove")["N"]
    for _ in range(3):
        bad = _count_share(p, identity, "3", 3, n_value=value, claimed_rows=min(max(rows, 0), 64))
        with pytest.raises(ProofError, match=r"^share of owner '3' must carry a valid range proof, got: interval "):
            Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="add-remove").receive_share(bad)
    with pytest.raises(ProofError, match="owner '3'"):
        proxy.receive_share(bad)
    assert list(proxy.excluded_) == ["3"]
    # the same construction with a true count in [0, max] is accepted at both ends
    for ok in (0, 1, 64):
        good = _count_share(p, identity, "4", 3, n_value=ok << (2 * p.frac_bits), claimed_rows=ok)
        assert Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="add-remove").receive_share(good) == "4"


def test_an_old_format_proof_is_refused_with_its_version(make_user, make_owner, identity, owner_signed):
    from dpdpca.protocol.proofs import split_proofs

    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="add-remove")
    msg = Message.from_bytes(make_owner(p, "1", range_proofs=True, release="add-remove").share(np.full((3, 3), 0.3)))
    range_only, count = split_proofs(msg.sections[PROOF_SECTION])
    assert range_only[:4] == b"DPRP" and len(count) > 0
    old = owner_signed(msg, identity(msg.meta["owner_id"]), p, **{PROOF_SECTION: range_only})
    with pytest.raises(ProofError, match=r"owner '1' must carry a valid range proof, got: range proof section must "
                                         r"be format version 3 .* got version 1"):
        proxy.receive_share(old)


def test_honest_shares_with_the_owners_noise_pass_the_noisy_count_statement(unit_rows):
    """With the owners' noise the N slot holds a noise share too: the statement is [-a, max 2^2f + a] (a public)."""
    rng = np.random.default_rng(7)
    parts = [unit_rows(rng, 4, 3) for _ in range(3)]
    run = run_protocol(parts, n_components=2, epsilon=1.0, delta=1e-5, key_bits=768, insecure_test_key=True,
                       range_proofs=True, release="add-remove", noise_by="owners")
    assert sorted(run.owners_present) == ["1", "2", "3"]
    assert "range proofs: on" in run.result.privacy.notes


LABEL = "owners:epsilon=1.0,delta=1e-05,owners=3,honest=3,quorum=3"


def test_the_count_statement_follows_the_signed_noise_label(make_user):
    """docs/threat-model.md: exact without noise; with the owners' noise, the tail bound of the owner's own N noise
    (13 sigma: about 79 rows at epsilon 1, 3 owners, d = 3), far below the public allowance."""
    import math

    from dpdpca.dp import calibrate_distributed
    from dpdpca.errors import MessageError
    from dpdpca.protocol.counts import NO_NOISE
    from dpdpca.protocol.proofs import count_statement

    p = make_user().params
    scale = 1 << (2 * p.frac_bits)
    exact = count_statement(p, 5, d=3, noise=NO_NOISE)
    assert (exact.lower, exact.scale, exact.span) == (0, scale, p.max_rows_per_owner)
    noisy = count_statement(p, 5, d=3, noise=LABEL)
    a = -noisy.lower
    assert (noisy.scale, noisy.span) == (1, p.max_rows_per_owner * scale + 2 * a)
    cal = calibrate_distributed(epsilon=1.0, delta=1e-5, d=3, frac_bits=p.frac_bits, owners=3, honest=3, quorum=3)
    sigma = math.sqrt(float(cal.local_sigma_squared_int["N"]))
    assert abs(a - 13 * sigma) <= 1 and 75 * scale < a < 85 * scale
    # the public allowance (what the statement would be without the label's calibration) is over 1000 times that
    assert p.noise_allowance > 1000 * a
    for bad in ("owners:epsilon=1.00,delta=1e-05,owners=3,honest=3,quorum=3", "owners:whatever"):
        with pytest.raises(MessageError, match="share statement noise"):
            count_statement(p, 5, d=3, noise=bad)


@pytest.mark.parametrize("offset, accepted", [(0, True), (-1, False)])
def test_with_the_owners_noise_the_count_may_move_by_its_noise_bound_and_no_more(make_user, identity, offset,
                                                                               accepted):
    from dpdpca.protocol.proofs import count_statement

    user = make_user()
    p = user.params
    a = -count_statement(p, 5, d=3, noise=LABEL).lower
    for value, claim in ((-a + offset, -a), ((p.max_rows_per_owner << (2 * p.frac_bits)) + a - offset,
                                              (p.max_rows_per_owner << (2 * p.frac_bits)) + a)):
        share = _count_share(p, identity, "3", 3, n_value=value, claimed_value=claim, noise=LABEL)
        proxy = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="add-remove")
        if accepted:
            assert proxy.receive_share(share) == "3"
        else:
            with pytest.raises(ProofError, match="owner '3'.*interval proof"):
                proxy.receive_share(share)


def test_the_pool_intake_checks_the_count_proof_too(make_user, make_owner, identity, pool):
    user = make_user()
    p = user.params
    batch = [make_owner(p, "1", range_proofs=True, release="add-remove").share(np.full((3, 3), 0.3)),
             _count_share(p, identity, "3", 3, n_value=-1000 << (2 * p.frac_bits), claimed_rows=0)]
    serial = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="add-remove")
    want = [Proxy._try(serial.receive_share, data) for data in batch]
    parallel = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, executor=pool, release="add-remove")
    got = parallel.receive_shares(iter(batch), expected=2)
    assert [type(o).__name__ for o in got] == [type(o).__name__ for o in want] == ["str", "ProofError"]
    assert str(got[1]) == str(want[1]) and "owner '3'" in str(got[1]) and "interval proof" in str(got[1])
    assert parallel.excluded_.keys() == {"3"}


def test_a_count_proof_on_a_share_without_an_encrypted_count_is_refused(make_user, make_owner, identity, owner_signed):
    from dpdpca.protocol.proofs import join_proofs, split_proofs

    user = make_user()
    p = user.params
    msg = Message.from_bytes(make_owner(p, "1", range_proofs=True, release="centred").share(np.full((3, 3), 0.3)))
    range_only, count = split_proofs(msg.sections[PROOF_SECTION])
    assert count == b""
    extra = owner_signed(msg, identity(msg.meta["owner_id"]), p, **{PROOF_SECTION: join_proofs(range_only, b"x")})
    proxy = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="centred")
    with pytest.raises(ProofError, match="owner '1'.*a count proof for a share without an encrypted count"):
        proxy.receive_share(extra)
    with pytest.raises(DpdpcaError, match="must end after its last proof"):
        split_proofs(join_proofs(range_only, b"") + b"!")


def _changed_in_transit(data, other):
    """``data`` (an honest owner's proved share) as someone on the way rewrites its proof section: swapped with
    ``other``'s, truncated, one byte flipped.  The owner's signatures are left as they were."""
    msg, proof = Message.from_bytes(data), Message.from_bytes(other).sections[PROOF_SECTION]
    own = msg.sections[PROOF_SECTION]
    flipped = own[:-1] + bytes([own[-1] ^ 1])
    return [Message(msg.type, msg.session, msg.key_fingerprint, msg.sender, msg.meta,
                    dict(msg.sections, **{PROOF_SECTION: section})).to_bytes()
            for section in (proof, own[:len(own) // 2], flipped)]


def test_a_proof_section_changed_in_transit_is_refused_without_excluding_and_the_owner_may_resend(make_user,
                                                                                                  make_owner):
    """docs/threat-model.md: the owner signs its proof section, so whoever rewrites a share on its way (a
    hand-carried share file) can only get it refused, as by deleting it; it cannot get an honest owner excluded."""
    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=2, range_proofs=True, release="centred")
    one = make_owner(p, "1", range_proofs=True, release="centred").share(np.full((3, 3), 0.3))
    two = make_owner(p, "2", range_proofs=True, release="centred").share(np.full((3, 3), -0.2))
    assert proxy.receive_share(one) == "1"
    for changed in _changed_in_transit(two, one):
        with pytest.raises(AuthenticationError, match=r"^share of owner '2' must carry its range proof signed by its "
                                                      r"owner, got a signature that does not verify"):
            proxy.receive_share(changed)
        assert proxy.excluded_ == {} and proxy.received == ["1"]
    assert proxy.receive_share(two) == "2"  # the owner's own share, resent as it made it
    proxy.close_collection()
    assert proxy.owners_ == ["1", "2"]
    note = Message.from_bytes(proxy.finish(epsilon=1.0, delta=1e-5)).meta["privacy"]["notes"]
    assert "range proofs: on" in note and "excluded" not in note


def test_a_share_with_proofs_but_no_valid_proof_signature_is_refused_when_proofs_are_required(make_user, make_owner,
                                                                                              identity):
    """The proof signature removed, not base64url, or another owner's (and the share statement still valid): refused
    as unauthenticated, the owner not excluded; a proxy without range proofs takes the share as before."""
    user = make_user()
    p = user.params
    msg = Message.from_bytes(make_owner(p, "2", range_proofs=True, release="centred").share(np.full((3, 3), 0.3)))
    statement = msg.meta["statement"]
    bare = {k: v for k, v in msg.meta.items() if k != PROOF_SIGNATURE}
    by_four = sign_proof(identity("4"), p, d=3, digest=statement["ciphertext_sha256"],
                         proof=msg.sections[PROOF_SECTION])
    proxy = Proxy(p, user.owner_keys, quorum=1, range_proofs=True, release="centred")
    for meta, why in ((bare, "got no meta 'proof_signature'"),
                      (dict(bare, **{PROOF_SIGNATURE: "x"}), "got meta 'proof_signature' that is not base64url"),
                      (dict(bare, **{PROOF_SIGNATURE: 7}), "got meta 'proof_signature' that is not a base64url"),
                      (dict(bare, **{PROOF_SIGNATURE: by_four}), "got a signature that does not verify")):
        data = Message(msg.type, msg.session, msg.key_fingerprint, msg.sender, meta, msg.sections).to_bytes()
        with pytest.raises(AuthenticationError, match=rf"^share of owner '2' must carry its range proof signed by "
                                                      rf"its owner, {why}"):
            proxy.receive_share(data)
    assert proxy.excluded_ == {}
    assert Proxy(p, user.owner_keys, quorum=1, release="centred").receive_share(data) == "2"
    assert proxy.receive_share(msg.to_bytes()) == "2"


def test_the_pool_intake_refuses_a_proof_changed_in_transit_as_the_serial_one_and_excludes_only_a_signed_failure(
        make_user, make_owner, identity, pool):
    user = make_user()
    p = user.params
    one = make_owner(p, "1", range_proofs=True, release="centred").share(np.full((3, 3), 0.3))
    two = make_owner(p, "2", range_proofs=True, release="centred").share(np.full((3, 3), -0.3))
    batch = [one, _changed_in_transit(two, one)[0], _poisoned_share(p, identity, "3", 3, scale=10**5)]
    serial = Proxy(p, user.owner_keys, quorum=2, range_proofs=True, release="centred")
    want = [Proxy._try(serial.receive_share, data) for data in batch]
    parallel = Proxy(p, user.owner_keys, quorum=2, range_proofs=True, executor=pool, release="centred")
    got = parallel.receive_shares(iter(batch), expected=3)
    assert [type(o).__name__ for o in got] == [type(o).__name__ for o in want] == ["str", "AuthenticationError",
                                                                                    "ProofError"]
    assert [str(o) for o in got] == [str(o) for o in want] and "owner '2'" in str(got[1])
    assert getattr(got[1], "party", None) is None
    assert parallel.excluded_.keys() == serial.excluded_.keys() == {"3"}
    assert parallel.receive_shares(iter([two]), expected=1) == serial.receive_shares(iter([two])) == ["2"]
    serial.close_collection()
    parallel.close_collection()
    assert parallel.owners_ == serial.owners_ == ["1", "2"]
    for name in as_release("centred").sections:
        assert parallel._aggregate[name].ciphertexts == serial._aggregate[name].ciphertexts


def test_proxy_aggregate_refuses_a_share_file_whose_proof_was_changed_and_takes_it_resent(tmp_path, capsys):
    """dpdpca proxy aggregate over hand-carried share files: a file whose proof section was swapped on its way
    fails the command with one line naming the owner, nobody excluded; the owner's own file again is aggregated."""
    from dpdpca.cli import main

    key = ["--key-bits", "768", "--insecure-test-key"]
    assert main(["keygen", "--out-dir", str(tmp_path / "keys"), *key, "--max-owners", "3",
                 "--max-rows-per-owner", "20", "--release", "centred"]) == 0
    for oid in ("1", "2"):
        assert main(["owner", "keygen", "--owner-id", oid, "--out-dir", str(tmp_path / "ids")]) == 0
        np.save(tmp_path / f"{oid}.npy", np.full((4, 3), 0.3 if oid == "1" else -0.2))
        assert main(["owner", "share", "--public", str(tmp_path / "keys/public.json"), "--identity",
                     str(tmp_path / f"ids/{oid}.identity.json"), "--data", str(tmp_path / f"{oid}.npy"),
                     "--insecure-test-key", "--release", "centred", "--range-proofs",
                     "--out", str(tmp_path / f"{oid}.msg")]) == 0
    made = (tmp_path / "2.msg").read_bytes()
    (tmp_path / "2.msg").write_bytes(_changed_in_transit(made, (tmp_path / "1.msg").read_bytes())[0])
    aggregate = ["proxy", "aggregate", "--insecure-test-key", "--public", str(tmp_path / "keys/public.json"), "--release", "centred",
                 "--quorum", "1", "--range-proofs", "--out-dir", str(tmp_path / "state"),
                 *(a for o in ("1", "2") for a in ("--owner-keys", str(tmp_path / f"ids/{o}.verify.json"))),
                 str(tmp_path / "1.msg"), str(tmp_path / "2.msg")]
    capsys.readouterr()
    assert main(aggregate) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpdpca: error: share of owner '2' must carry its range proof signed by its owner, got a "
                          "signature that does not verify") and err.count("\n") == 1
    assert "refused owner" not in err and not (tmp_path / "state" / "state.msg").exists()
    (tmp_path / "2.msg").write_bytes(made)  # the owner sends its file again
    assert main(aggregate) == 0
    out = capsys.readouterr()
    assert "aggregated 2 signed shares (1, 2)" in out.out and "refused owner" not in out.err
    assert main(["proxy", "finish", "--insecure-test-key", "--state", str(tmp_path / "state"), "--epsilon", "10", "--delta", "1e-5",
                 "--range-proofs", "--out", str(tmp_path / "r.msg")]) == 0
