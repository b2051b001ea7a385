"""The exact range-proof mode (``range_proof_mode="exact"``): every slot of every ciphertext proved within its own
declared interval.  Honest shares pass (both releases, with the owners' noise); a share one step outside in any slot
(R's diagonal past its bound or negative, an off-diagonal or v slot out by one, a negative row count) is refused,
named and its owner excluded; a proof moved to another share or made in the slack mode is refused."""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca.crypto.rangeproof import ProverBase, SectionWitness, encrypt_for_proof
from dpdpca.errors import ParameterError, ProofError
from dpdpca.protocol import Proxy
from dpdpca.protocol.counts import ShareStatement, ciphertext_digest
from dpdpca.protocol.messages import Message, MessageType
from dpdpca.protocol.proofs import (PROOF_SECTION, PROOF_SIGNATURE, join_proofs, prove_share, sign_proof,
                                    slot_statements, split_proofs)
from dpdpca.protocol.releases import as_release
from dpdpca.protocol.runner import run_protocol

D = 3
DIAG = (0, 3, 5)  # R's upper triangle at d = 3, row-major: (0,0) (0,1) (0,2) (1,1) (1,2) (2,2)


def _exact_share(p, identity, owner_id, *, values, claimed=None, release="add-remove", noise="none"):
    """A share encrypting ``values`` (section -> slot values) with an exact-mode proof made by the honest prover told
    the values are ``claimed`` (default: the truth).  The prover cannot check the ciphertexts: a lie about a slot
    is a lie in the relation to C."""
    claimed = values if claimed is None else claimed
    shapes = as_release(release).share_chunks(D, p.layout.slots)
    base = ProverBase.draw(p.public_key)
    arrays, exps = {}, {}
    for name, chunks in shapes.items():
        arrays[name], exps[name] = encrypt_for_proof(base, values[name], layout=p.layout, chunks=chunks,
                                                     bound=max(1, max(abs(v) for v in values[name])))
    sections = {name: arr.to_bytes() for name, arr in arrays.items()}
    digest = ciphertext_digest(sections, as_release(release).sections)
    st = ShareStatement.sign(identity(owner_id), session=p.session_id, key_fingerprint=p.key_fingerprint, d=D,
                             n_rows=None if release == "add-remove" else 3, ciphertext_sha256=digest, noise=noise)
    # the owner's own prover (prove_share), handed the claimed values as its witness
    sections[PROOF_SECTION] = prove_share(base, p, release, arrays,
                                          {name: SectionWitness(claimed[name], exps[name]) for name in shapes},
                                          owner_id=owner_id, d=D, digest=digest, noise=noise, mode="exact")
    meta = {"owner_id": owner_id, "d": D, "statement": st.to_json(), "release": release,
            "declared_bounds": {k: str(b) for k, b in p.share_bounds(release).items()},
            PROOF_SIGNATURE: sign_proof(identity(owner_id), p, d=D, digest=digest, proof=sections[PROOF_SECTION])}
    return Message(MessageType.OWNER_SHARE, p.session_id, p.key_fingerprint, f"owner:{owner_id}", meta=meta,
                   sections=sections).to_bytes()


def _values(p, release="add-remove", **slots):
    """Zeros in every slot, but for ``name=(index, value)`` overrides."""
    shapes = as_release(release).share_chunks(D, p.layout.slots)
    out = {name: [0] * sum(c) for name, c in shapes.items()}
    for name, (i, v) in slots.items():
        out[name][i] = v
    return out


def _proxy(user, **kw):
    kw.setdefault("release", "add-remove")
    return Proxy(user.params, user.owner_keys, quorum=1, range_proofs=True, range_proof_mode="exact", **kw)


@pytest.mark.parametrize("release, noise_by, processes", [("add-remove", "proxy", False), ("centred", "proxy", False),
                                                          ("add-remove", "owners", False),
                                                          ("add-remove", "proxy", True)])
def test_honest_exact_shares_are_accepted_and_the_release_is_exact(unit_rows, release, noise_by, processes):
    rng = np.random.default_rng(11)
    parts = [unit_rows(rng, 4, D) for _ in range(3)]
    run = run_protocol(parts, n_components=2, epsilon=1.0, delta=1e-5, key_bits=768, insecure_test_key=True,
                       verify=noise_by == "proxy", range_proofs=True, range_proof_mode="exact", release=release,
                       noise_by=noise_by, processes=processes)
    assert sorted(run.owners_present) == ["1", "2", "3"]
    if noise_by == "proxy":
        assert run.verify is not None and run.verify["max_abs_integer_error"] == 0
    assert "range proofs: on, mode exact" in run.result.privacy.notes


def test_the_slot_intervals_follow_the_declared_bounds(make_user):
    """R's diagonal [0, B_R], its other entries [-B_R, B_R], v [-B_v, B_v], N [0, max_rows] at scale 2**(2f)."""
    user = make_user()
    p = user.params
    b_r, b_v = p.max_rows_per_owner << (2 * p.frac_bits), p.max_rows_per_owner << p.frac_bits

    class _Arr:  # what slot_statements reads of an EncryptedArray: ciphertexts and chunks
        def __init__(self, m):
            self.ciphertexts, self.chunks = [1], [m]

    sts = slot_statements(p, "add-remove", {"R": _Arr(6), "v": _Arr(3), "N": _Arr(1)}, d=D)
    r, v, n = sts
    assert [(lo, lo + sp) for lo, sp in zip(r.lowers, r.spans)] == [
        (0, b_r) if i in DIAG else (-b_r, b_r) for i in range(6)]
    assert set(zip(v.lowers, v.spans)) == {(-b_v, 2 * b_v)}
    assert (n.lowers, n.scales, n.spans) == ((0,), (1 << (2 * p.frac_bits),), (p.max_rows_per_owner,))


def _bad_cases(p):
    b_r, b_v = p.max_rows_per_owner << (2 * p.frac_bits), p.max_rows_per_owner << p.frac_bits
    one = 1 << (2 * p.frac_bits)
    return {  # name -> (values, what the cheater claims)
        "R diagonal = bound + 1": (dict(R=(3, b_r + 1)), dict(R=(3, b_r))),
        "R diagonal negative": (dict(R=(0, -1)), dict(R=(0, 0))),
        "R off-diagonal = -bound - 1": (dict(R=(1, -b_r - 1)), dict(R=(1, -b_r))),
        "v = bound + 1": (dict(v=(2, b_v + 1)), dict(v=(2, b_v))),
        "N negative": (dict(N=(0, -one)), dict(N=(0, 0))),
        "N = max rows + 1": (dict(N=(0, (p.max_rows_per_owner + 1) * one)), dict(N=(0, p.max_rows_per_owner * one))),
    }


@pytest.mark.parametrize("case", ["R diagonal = bound + 1", "R diagonal negative", "R off-diagonal = -bound - 1",
                                  "v = bound + 1", "N negative", "N = max rows + 1"])
def test_one_slot_out_by_one_is_refused_named_and_excluded(make_user, identity, case):
    """docs/threat-model.md: in exact mode no slot leaves its declared interval, not even by one."""
    user = make_user()
    p = user.params
    values, claim = _bad_cases(p)[case]
    proxy = _proxy(user)
    bad = _exact_share(p, identity, "3", values=_values(p, **values), claimed=_values(p, **claim))
    with pytest.raises(ProofError, match=r"^share of owner '3' must carry a valid range proof, got: interval proof: "
                                         r"the bits, the relation"):
        proxy.receive_share(bad)
    assert list(proxy.excluded_) == ["3"]
    # the same construction telling the truth at the interval's end is accepted
    assert _proxy(user).receive_share(_exact_share(p, identity, "4", values=_values(p, **claim))) == "4"


def test_the_honest_exact_prover_refuses_a_slot_outside(make_user, make_owner):
    from dpdpca.errors import OverflowRiskError
    from dpdpca.protocol.proofs import prove_share

    user = make_user()
    p = user.params
    shapes = as_release("add-remove").share_chunks(D, p.layout.slots)
    base = ProverBase.draw(p.public_key)
    values = _values(p, R=(0, -1))
    arrays, wits = {}, {}
    for name, chunks in shapes.items():
        arrays[name], e = encrypt_for_proof(base, values[name], layout=p.layout, chunks=chunks, bound=1)
        wits[name] = SectionWitness(values[name], e)
    with pytest.raises(OverflowRiskError, match=r"values\[0\] must be 0 \+ 1 \* x"):
        prove_share(base, p, "add-remove", arrays, wits, owner_id="1", d=D, digest="x", mode="exact")


def test_proofs_moved_replayed_or_in_the_other_mode_are_refused(make_user, make_owner, identity, owner_signed):
    user = make_user()
    p = user.params
    a = Message.from_bytes(make_owner(p, "2", range_proofs=True, range_proof_mode="exact").share(np.full((3, 3), 0.3)))
    b = Message.from_bytes(make_owner(p, "4", range_proofs=True, range_proof_mode="exact").share(np.full((3, 3), 0.3)))
    assert split_proofs(a.sections[PROOF_SECTION], mode="exact")  # one interval proof per ciphertext
    proxy = _proxy(user)
    assert proxy.receive_share(a.to_bytes()) == "2"
    # a's proofs on b's ciphertexts (same data: other ciphertexts, other digest), signed by b's owner as its own
    moved = owner_signed(b, identity(b.meta["owner_id"]), p, **{PROOF_SECTION: a.sections[PROOF_SECTION]})
    with pytest.raises(ProofError, match="owner '4'.*interval proof"):
        proxy.receive_share(moved)
    # a slack-mode share sent to an exact-mode proxy, and the reverse
    slack = make_owner(p, "5", range_proofs=True).share(np.full((3, 3), 0.3))
    with pytest.raises(ProofError, match=r"owner '5' must carry a valid range proof, got: range proof mode must be "
                                         r"'exact' \(the session's\), got 'slack'"):
        proxy.receive_share(slack)
    exact = make_owner(p, "6", range_proofs=True, range_proof_mode="exact").share(np.full((3, 3), 0.3))
    with pytest.raises(ProofError, match=r"owner '6' .* mode must be 'slack' \(the session's\), got 'exact'"):
        Proxy(p, user.owner_keys, quorum=1, range_proofs=True).receive_share(exact)
    assert sorted(proxy.excluded_) == ["4", "5"]
    with pytest.raises(ParameterError, match="range_proof_mode"):
        Proxy(p, user.owner_keys, quorum=1, range_proofs=True, range_proof_mode="loose")


def test_a_proved_share_sent_by_another_owner_or_in_a_later_session_is_refused_by_its_proofs(make_user, make_owner,
                                                                                            identity, sent_as):
    """docs/threat-model.md: as in the slack mode, the exact proofs are bound to their owner and session: alice's share
    sent by bob to a proxy that has not seen hers, and again in a later session under the same key by whoever its
    keyring lists as 'alice', is refused by the proofs alone."""
    from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring

    user = make_user()
    p = user.params
    share = make_owner(p, "alice", range_proofs=True, range_proof_mode="exact").share(np.full((3, D), 0.3))
    msg = Message.from_bytes(share)
    proxy = _proxy(user)
    with pytest.raises(ProofError, match=r"^share of owner 'bob' must carry a valid range proof, got: interval proof"):
        proxy.receive_share(sent_as(msg, identity("bob"), p))
    assert list(proxy.excluded_) == ["bob"]
    assert proxy.receive_share(share) == "alice"
    later = make_user().params
    assert later.key_fingerprint == p.key_fingerprint and later.session_id != p.session_id
    other = OwnerIdentity.generate("alice")
    proxy = Proxy(later, OwnerKeyring.from_identities([other]), quorum=1, range_proofs=True,
                  range_proof_mode="exact", release="add-remove")
    with pytest.raises(ProofError, match=r"^share of owner 'alice' must carry a valid range proof, got: interval "):
        proxy.receive_share(sent_as(msg, other, later))


def _rerandomized_copy(msg, p):
    """The sections of ``msg`` (an exact-proved share) with every ciphertext times ``h**delta`` (``h`` the owner's DJN
    base, public in each proof) and each proof's relation response ``Z_D`` moved by ``e_D delta`` to match: ``D`` is
    ``C`` over public factors, so it moves by ``h**delta`` too.  Only the challenges' binding to the ciphertext and
    to the owner's context can refuse it."""
    import dataclasses
    import secrets

    from dpdpca.crypto import EncryptedArray
    from dpdpca.crypto import _gmp as bk
    from dpdpca.crypto import bitproof as bp
    from dpdpca.protocol import proofs
    from dpdpca.protocol.sections import load_share_arrays

    release, d, pk = msg.meta["release"], msg.meta["d"], p.public_key
    statement = ShareStatement.from_json(msg.meta["statement"])
    arrays = load_share_arrays(msg, p, d, owners=1, release=release)
    context = proofs.proof_context(p, owner_id=msg.meta["owner_id"], d=d, release=release,
                                   digest=statement.ciphertext_sha256)
    statements = proofs.slot_statements(p, release, arrays, d=d, noise=statement.noise)
    cts, out = [], []
    for raw, st in zip(split_proofs(msg.sections[PROOF_SECTION], mode="exact"), statements):
        pf = bp.IntervalProof.from_bytes(raw, pk, st)
        commits = [int(v) for v in bk.bytes_to_ints(pf.commitments, pk.ciphertext_bytes)]
        _, e_rel, _ = bp._subchallenges(bp._hash(context, pk, st, pf.base, pf.bit_ciphertexts, commits), st.bits)
        delta = secrets.randbits(32) + 1
        cts.append(st.ciphertext * pow(pf.base, delta, pk.nsquare) % pk.nsquare)
        out.append(dataclasses.replace(pf, relation_response=pf.relation_response + e_rel * delta).to_bytes(pk, st))
    new = iter(cts)
    sections = {name: EncryptedArray(pk, arr.layout, arr.chunks, arr.bound,
                                     [next(new) for _ in arr.ciphertexts]).to_bytes() for name, arr in arrays.items()}
    sections[PROOF_SECTION] = join_proofs(*out, mode="exact")
    return sections


def test_a_rerandomized_copy_of_a_proved_share_is_refused_by_its_proofs(make_user, make_owner, identity, sent_as):
    """docs/threat-model.md: bob multiplies every ciphertext of alice's share by h**delta and moves each proof's
    relation response to match (:func:`_rerandomized_copy`): fresh ciphertexts of her values, past the replay check.
    Each proof's challenges hash its ciphertext and her context: refused, bob excluded."""
    user = make_user()
    p = user.params
    share = make_owner(p, "alice", range_proofs=True, range_proof_mode="exact").share(np.full((3, D), 0.3))
    msg = Message.from_bytes(share)
    proxy = Proxy(p, user.owner_keys, quorum=2, range_proofs=True, range_proof_mode="exact", release="add-remove")
    assert proxy.receive_share(share) == "alice"
    with pytest.raises(ProofError, match=r"^share of owner 'bob' must carry a valid range proof, got: interval proof"):
        proxy.receive_share(sent_as(msg, identity("bob"), p, **_rerandomized_copy(msg, p)))
    assert list(proxy.excluded_) == ["bob"] and proxy.received == ["alice"]


def test_the_pool_intake_and_the_proxy_state_keep_the_exact_mode(make_user, make_owner, identity):
    from dpdpca.crypto import local_process_pool

    user = make_user()
    p = user.params
    batch = [make_owner(p, "1", range_proofs=True, range_proof_mode="exact").share(np.full((3, 3), 0.3)),
             _exact_share(p, identity, "3", values=_values(p, R=(0, -1)), claimed=_values(p))]
    with local_process_pool(2) as pool:
        parallel = _proxy(user, executor=pool)
        got = parallel.receive_shares(iter(batch), expected=2)
    assert [type(o).__name__ for o in got] == ["str", "ProofError"] and "owner '3'" in str(got[1])
    assert parallel.excluded_.keys() == {"3"}
    parallel.close_collection()
    back = Proxy.from_state(p, user.owner_keys, parallel.state_bytes())
    assert back.range_proof_mode == "exact" and "mode exact" in back.proof_note()


def test_role_commands_and_run_take_the_range_proof_mode(tmp_path, capsys):
    """owner share / proxy aggregate --range-proof-mode exact; a slack-mode share refused with one line naming its
    owner while the session goes on; dpdpca run --range-proof-mode exact says so; another mode exits 2."""
    import json

    from dpdpca.cli import main

    key = ["--key-bits", "768", "--insecure-test-key"]
    assert main(["keygen", "--out-dir", str(tmp_path / "keys"), *key, "--max-owners", "3",
                 "--max-rows-per-owner", "20"]) == 0
    rng = np.random.default_rng(2)
    for oid, mode in (("1", "exact"), ("2", "exact"), ("3", "slack")):
        assert main(["owner", "keygen", "--owner-id", oid, "--out-dir", str(tmp_path / "ids")]) == 0
        X = rng.normal(size=(5, D))
        np.save(tmp_path / f"{oid}.npy", 0.9 * X / np.linalg.norm(X, axis=1, keepdims=True))
        assert main(["owner", "share", "--public", str(tmp_path / "keys/public.json"), "--identity",
                     str(tmp_path / f"ids/{oid}.identity.json"), "--data", str(tmp_path / f"{oid}.npy"),
                     "--insecure-test-key", "--range-proofs", "--range-proof-mode", mode,
                     "--out", str(tmp_path / f"{oid}.msg")]) == 0
    verify = [a for o in ("1", "2", "3") for a in ("--owner-keys", str(tmp_path / f"ids/{o}.verify.json"))]
    capsys.readouterr()
    assert main(["proxy", "aggregate", "--insecure-test-key", "--public", str(tmp_path / "keys/public.json"), *verify, "--quorum", "2",
                 "--range-proofs", "--range-proof-mode", "exact", "--out-dir", str(tmp_path / "state"),
                 *(str(tmp_path / f"{o}.msg") for o in ("1", "3", "2"))]) == 0
    out = capsys.readouterr()
    assert "aggregated 2 signed shares (1, 2)" in out.out
    assert out.err.count("refused owner 3: share of owner '3' must carry a valid range proof, got: range proof "
                         "mode must be 'exact' (the session's), got 'slack'") == 1
    assert main(["proxy", "finish", "--insecure-test-key", "--state", str(tmp_path / "state"), "--epsilon", "10", "--delta", "1e-5",
                 "--range-proof-mode", "slack", "--out", str(tmp_path / "r.msg")]) == 2
    assert "--range-proof-mode must match the aggregated state (exact), got slack" in capsys.readouterr().err
    assert main(["proxy", "finish", "--insecure-test-key", "--state", str(tmp_path / "state"), "--epsilon", "10", "--delta", "1e-5",
                 "--range-proofs", "--range-proof-mode", "exact", "--out", str(tmp_path / "r.msg")]) == 0
    capsys.readouterr()
    user = ["user", "finish", "--insecure-test-key", "--private", str(tmp_path / "keys/private.json"), *verify, "--components", "2"]
    # a user requiring the slack mode refuses this release (and decrypts nothing); requiring exact, it decrypts
    assert main([*user, "--range-proof-mode", "slack", "--out", str(tmp_path / "no.npz"), str(tmp_path / "r.msg")]) == 2
    assert "range proofs in mode 'slack' (--range-proof-mode)" in capsys.readouterr().err
    assert not (tmp_path / "no.npz").exists()
    assert main([*user, "--range-proof-mode", "exact", "--out", str(tmp_path / "pcs.npz"), "--json",
                 str(tmp_path / "r.msg")]) == 0
    assert "range proofs: on, mode exact" in json.loads(capsys.readouterr().out)["privacy"]["notes"]
    assert main(["run", "--data", str(tmp_path / "1.npy"), *key, "--owners", "2", "--components", "2", "--json",
                 "--range-proofs", "--range-proof-mode", "exact", "--max-owners", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "range proofs: on, mode exact" in summary["privacy"]["notes"]
    assert summary["params"]["range_proof_mode"] == "exact"
    assert main(["run", "--data", str(tmp_path / "1.npy"), *key, "--owners", "2", "--range-proofs",
                 "--range-proof-mode", "loose"]) == 2
    err = capsys.readouterr().err
    assert "--range-proof-mode" in err and "loose" in err


def test_with_the_owners_noise_every_interval_widens_by_its_sections_tail_bound_within_the_declared_bound(make_user):
    """docs/threat-model.md: with an owners' noise label each section's intervals widen by that section's noise tail
    bound a (13 sigma of the owner's own noise in it), on both sides; every end stays within the declared share
    bound the slots are sized for."""
    from dpdpca.protocol.add_remove import owner_noise_bound

    p = make_user().params
    label = "owners:epsilon=1.0,delta=1e-05,owners=3,honest=3,quorum=3"
    b_r, b_v = p.max_rows_per_owner << (2 * p.frac_bits), p.max_rows_per_owner << p.frac_bits

    class _Arr:
        def __init__(self, m):
            self.ciphertexts, self.chunks = [1], [m]

    a = {s: owner_noise_bound(label, block=s, d=D, frac_bits=p.frac_bits, allowance=p.noise_allowance)
         for s in ("R", "v", "N")}
    assert all(0 < x < p.noise_allowance for x in a.values())
    r, v, n = slot_statements(p, "add-remove", {"R": _Arr(6), "v": _Arr(3), "N": _Arr(1)}, d=D, noise=label)
    assert [(lo, lo + sp) for lo, sp in zip(r.lowers, r.spans)] == [
        (-a["R"], b_r + a["R"]) if i in DIAG else (-b_r - a["R"], b_r + a["R"]) for i in range(6)]
    assert set(zip(v.lowers, v.spans)) == {(-b_v - a["v"], 2 * (b_v + a["v"]))}
    assert (n.lowers[0], n.lowers[0] + n.spans[0]) == (-a["N"], (p.max_rows_per_owner << (2 * p.frac_bits)) + a["N"])
    declared = p.share_bounds("add-remove")
    for name, st in zip(("R", "v", "N"), (r, v, n)):
        assert max(max(abs(lo), abs(lo + sc * sp)) for lo, sc, sp in zip(st.lowers, st.scales, st.spans)) \
            <= declared[name]


def test_slots_within_their_intervals_pass_even_when_no_rows_give_them(make_user, identity):
    """docs/threat-model.md, the exact mode's limit: each slot is checked alone, so R with a zero diagonal and
    off-diagonal entries at +B (no rows give it: not positive semi-definite), v at -B and N at max_rows passes."""
    user = make_user()
    p = user.params
    b_r, b_v = p.max_rows_per_owner << (2 * p.frac_bits), p.max_rows_per_owner << p.frac_bits
    values = _values(p)
    values["R"] = [0 if i in DIAG else b_r for i in range(6)]
    values["v"] = [-b_v] * D
    values["N"] = [p.max_rows_per_owner << (2 * p.frac_bits)]
    assert _proxy(user).receive_share(_exact_share(p, identity, "3", values=values)) == "3"


def test_a_short_or_old_format_proof_section_is_refused_naming_the_owner(make_user, make_owner, identity, owner_signed):
    import struct

    user = make_user()
    p = user.params
    msg = Message.from_bytes(make_owner(p, "2", range_proofs=True, range_proof_mode="exact").share(np.full((3, 3), 0.3)))
    proofs = split_proofs(msg.sections[PROOF_SECTION], mode="exact")
    assert len(proofs) == 3  # R, v and N at d = 3: one ciphertext each
    old = b"DPSP\x02" + b"".join(struct.pack(">Q", len(x)) + x for x in proofs[:2])  # version 2: no mode byte
    for section, why in ((join_proofs(*proofs[:2], mode="exact"), "one exact proof per ciphertext \\(3\\), got 2"),
                         (old, "got version 2 \\(slack proofs without a mode")):
        bad = owner_signed(msg, identity(msg.meta["owner_id"]), p, **{PROOF_SECTION: section})
        with pytest.raises(ProofError, match=rf"^share of owner '2' must carry a valid range proof, got: .*{why}"):
            _proxy(user).receive_share(bad)
