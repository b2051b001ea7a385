"""The attacks of the threat model (docs/threat-model.md), each reproduced and shown refused or harmless.

Every test here is named in docs/threat-model.md next to the claim it backs.
"""

from __future__ import annotations

import base64
import tracemalloc

import gmpy2
import numpy as np
import phe
import pytest
from scipy import stats

from centred_parties import Proxy, centred_owners
from dpdpca.crypto import EncryptedArray
from dpdpca.errors import (AuthenticationError, DataError, InsecureKeyError, MessageError, ProtocolError)
from dpdpca.protocol import DataUser, ProtocolParams
from dpdpca.protocol.counts import ShareStatement, ciphertext_digest
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
from dpdpca.protocol.ledger import ReleaseLedger
from dpdpca.protocol.messages import Message, MessageType, frame


# These tests attack and check the Wang-Chang (centred) release (centred_parties.py says why).
@pytest.fixture
def make_owner(make_owner):
    return centred_owners(make_owner)


def _rewrap(share: bytes, *, owner_id: str | None = None, meta: dict | None = None,
            sections: dict | None = None, mtype: MessageType | None = None) -> bytes:
    """The share's bytes with another owner id / meta / sections, digest recomputed (anyone can)."""
    m = Message.from_bytes(share)
    new_meta = dict(m.meta)
    if owner_id is not None:
        new_meta["owner_id"] = owner_id
    new_meta.update(meta or {})
    sender = f"owner:{new_meta['owner_id']}" if "owner_id" in new_meta else m.sender
    return Message(mtype or m.type, m.session, m.key_fingerprint, sender, new_meta,
                   sections if sections is not None else m.sections).to_bytes()


# -- 1. no decryption oracle ------------------------------------------------------------------

#: The data user's public methods: each decrypts only a release for its own use (``reconstruct*``, ``finish``) or
#: makes its key (``generate``); none decrypts for, or answers, another party.  A new one must be added here on purpose.
USER_METHODS = {"generate", "reconstruct", "reconstruct_add_remove", "finish"}


def test_crafted_count_request_gets_nothing(make_user, make_owner):
    """Version 1's attack: E[v_i] of one owner plus a known shift, sent as a count request."""
    user = make_user(max_rows_per_owner=8)
    p = user.params
    share = Message.from_bytes(make_owner(p, "1").share(np.full((5, 2), 0.5)))
    v0 = EncryptedArray.from_bytes(share.section("v"), p.public_key).select([0])
    crafted = v0.add_plain([-(5 << 15) + 3], plain_bound=5 << 16)  # lands in [owners, owners * max_rows]
    body = Message(MessageType.OWNER_SHARE, p.session_id, p.key_fingerprint, "proxy",
                   meta={"owners": ["1"], "d": 2}, sections={"N": crafted.to_bytes()}).to_bytes()
    raw = bytearray(body[:-32])
    raw[7] = 2  # the retired COUNT_REQUEST type
    with pytest.raises(MessageError, match=r"message type must be one of \[1, 4, 5\], got 2"):
        Message.from_bytes(frame(bytes(raw)))
    # nothing in the data user decrypts for another party: its public methods are these, none answers a message
    public = {name for name in dir(DataUser) if not name.startswith("_") and callable(getattr(DataUser, name))}
    assert public == USER_METHODS, public ^ USER_METHODS
    # and passed off as a result, the crafted ciphertext is refused before any decryption: without statements,
    # and with owner 1's own valid statement (a proxy holds them) as sections of the wrong size
    statement = share.meta["statement"]
    for statements, refused in (([], "share statements must be a list of 1 to"),
                                ([statement], "section R2 must hold 2 ciphertexts")):
        fake = Message(MessageType.MASKED_RESULT, p.session_id, p.key_fingerprint, "proxy",
                       meta={"owners": ["1"], "d": 2, "N": "5", "frac_bits": 16, "statements": statements},
                       sections={"R2": crafted.to_bytes(), "v2": crafted.to_bytes()}).to_bytes()
        with pytest.raises(MessageError, match=refused):
            user.reconstruct(fake)
    assert user.ledger.releases() == {}


def test_forged_or_implausible_n_is_refused(make_user, make_owner):
    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=2)
    for oid, n in (("1", 3), ("2", 4)):
        proxy.receive_share(make_owner(p, oid).share(np.full((n, 2), 0.3)))
    proxy.close_collection()
    result = Message.from_bytes(proxy.finish(epsilon=1.0, delta=1e-5))
    for forged_n in ("-5", "1", "8", "70"):
        with pytest.raises((MessageError, ProtocolError), match="N must|meta N"):
            user.reconstruct(_rewrap(result.to_bytes(), meta={"N": forged_n}))
    statements = result.meta["statements"]
    inflated = [dict(statements[0], n_rows="30"), statements[1]]
    with pytest.raises(AuthenticationError, match="must verify"):
        user.reconstruct(_rewrap(result.to_bytes(), meta={"N": "34", "statements": inflated}))
    with pytest.raises(ProtocolError, match="unique"):
        user.reconstruct(_rewrap(result.to_bytes(), meta={"N": "6", "statements": [statements[0]] * 2}))
    assert user.ledger.releases() == {}  # nothing was decrypted
    M, _, _, _ = user.reconstruct(result.to_bytes())
    assert user.n_ == 7 and M.shape == (2, 2)


def test_a_validly_signed_row_count_outside_its_range_is_refused_by_the_proxy_and_the_user(make_user, make_owner,
                                                                                           identity):
    # owner 1 signs its own statement with a count of 0 or past max_rows_per_owner (64): the signature verifies, so
    # only the range check stands between the lie and the release's N
    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=2)
    honest = {oid: make_owner(p, oid).share(np.full((n, 2), 0.3)) for oid, n in (("1", 3), ("2", 4))}
    for share in honest.values():
        proxy.receive_share(share)
    proxy.close_collection()
    result = Message.from_bytes(proxy.finish(epsilon=1.0, delta=1e-5))
    statements = result.meta["statements"]
    mine = ShareStatement.from_json(statements[0])
    assert mine.owner_id == "1"
    for n in (0, 65, 10**6):
        lie = ShareStatement.sign(identity("1"), session=p.session_id, key_fingerprint=p.key_fingerprint, d=2,
                                  n_rows=n, ciphertext_sha256=mine.ciphertext_sha256).to_json()
        refused = rf"owner '1' row count must be in \[1, 64\], got {n}"
        with pytest.raises(MessageError, match=refused):
            Proxy(p, user.owner_keys, quorum=1).receive_share(_rewrap(honest["1"], meta={"statement": lie}))
        with pytest.raises(MessageError, match=refused):  # a proxy forwarding it: refused before any decryption
            user.reconstruct(_rewrap(result.to_bytes(), meta={"N": str(n + 4), "statements": [lie, statements[1]]}))
    # a statement owner 1 signed for this session under another key (the session id is all a user could reuse)
    other_key = ShareStatement.sign(identity("1"), session=p.session_id, key_fingerprint="0" * 64, d=2, n_rows=3,
                                    ciphertext_sha256=mine.ciphertext_sha256).to_json()
    with pytest.raises(AuthenticationError, match="must verify"):
        user.reconstruct(_rewrap(result.to_bytes(), meta={"statements": [other_key, statements[1]]}))
    assert user.ledger.releases() == {}


# -- 2. owner identity: replays and unknown signers ----------------------------------------------

def test_replayed_share_under_a_new_id_is_refused(make_user, make_owner, identity):
    user = make_user()
    p = user.params
    alice = make_owner(p, "alice").share(np.full((4, 3), 0.2))
    proxy = Proxy(p, user.owner_keys)
    proxy.receive_share(alice)
    # mallory is not listed: an unknown signer
    with pytest.raises(AuthenticationError, match="listed owner, got 'mallory'"):
        proxy.receive_share(_rewrap(alice, owner_id="mallory"))
    # bob is listed, but alice's signature does not cover bob's id
    stolen = Message.from_bytes(alice).meta["statement"]
    with pytest.raises(AuthenticationError, match="must be for owner 'bob'"):
        proxy.receive_share(_rewrap(alice, owner_id="bob"))
    with pytest.raises(AuthenticationError, match="must verify"):
        proxy.receive_share(_rewrap(alice, owner_id="bob", meta={"statement": dict(stolen, owner_id="bob")}))
    # bob signs alice's ciphertexts with his own key: identical ciphertexts are refused under any id
    m = Message.from_bytes(alice)
    bob_statement = ShareStatement.sign(identity("bob"), session=p.session_id, key_fingerprint=p.key_fingerprint,
                                        d=3, n_rows=4, ciphertext_sha256=ciphertext_digest(m.sections))
    with pytest.raises(ProtocolError, match="ciphertexts must be fresh"):
        proxy.receive_share(_rewrap(alice, owner_id="bob", meta={"statement": bob_statement.to_json()}))
    # unsigned, or signed over other ciphertexts
    meta = {k: v for k, v in m.meta.items() if k != "statement"}
    with pytest.raises(MessageError, match="share statement must be an object"):
        Proxy(p, user.owner_keys).receive_share(Message(m.type, m.session, m.key_fingerprint, m.sender, meta,
                                                        m.sections).to_bytes())
    other = Message.from_bytes(make_owner(p, "alice").share(np.full((4, 3), 0.1)))
    with pytest.raises(AuthenticationError, match="cover these ciphertexts"):
        Proxy(p, user.owner_keys).receive_share(_rewrap(alice, sections=other.sections))
    assert proxy.received == ["alice"]


def test_a_signature_from_another_session_does_not_verify(make_user, make_owner, identity):
    user = make_user()
    other = ProtocolParams.create(user.params.public_key, release="any", max_owners=10, max_rows_per_owner=64)
    share = Message.from_bytes(make_owner(other, "alice").share(np.full((3, 2), 0.2)))
    # rewrapped into this session (session field changed, digest recomputed): the signature covers the old one
    moved = Message(share.type, user.params.session_id, share.key_fingerprint, share.sender, share.meta,
                    share.sections).to_bytes()
    with pytest.raises(AuthenticationError, match="must verify"):
        Proxy(user.params, user.owner_keys).receive_share(moved)


def test_keyring_and_identity_files(tmp_path, identity):
    import os
    import stat

    alice = OwnerIdentity.generate("alice")
    alice.save(tmp_path / "a.identity.json")
    assert stat.S_IMODE(os.stat(tmp_path / "a.identity.json").st_mode) == 0o600
    with pytest.raises(Exception, match="must not exist"):
        alice.save(tmp_path / "a.identity.json")
    back = OwnerIdentity.load(tmp_path / "a.identity.json")
    assert back.verify_key_b64 == alice.verify_key_b64 and "signing" not in repr(back)
    OwnerKeyring.from_identities([alice]).save(tmp_path / "a.verify.json")
    OwnerKeyring.from_identities([identity("bob")]).save(tmp_path / "b.verify.json")
    ring = OwnerKeyring.load([tmp_path / "a.verify.json", tmp_path / "b.verify.json"])
    assert sorted(ring) == ["alice", "bob"]
    OwnerKeyring.from_identities([OwnerIdentity.generate("alice")]).save(tmp_path / "a2.verify.json")
    with pytest.raises(ProtocolError, match="one verify key"):
        OwnerKeyring.load([tmp_path / "a.verify.json", tmp_path / "a2.verify.json"])


# -- 3. one release per session -------------------------------------------------------------------

def test_finish_twice_is_refused_across_processes_and_the_user_decrypts_once(tmp_path, make_user, make_owner,
                                                                            monkeypatch):
    user = make_user()
    p = user.params
    decrypted: list[str] = []  # every call of the scheme's decryption, from any party

    def counting(name, original):
        def counted(self, *args, **kwargs):
            decrypted.append(name)
            return original(self, *args, **kwargs)
        return counted
    for name in ("decrypt", "decrypt_sections"):
        monkeypatch.setattr(type(p.scheme), name, counting(name, getattr(type(p.scheme), name)))
    proxy = Proxy(p, user.owner_keys, quorum=2)
    for oid in ("1", "2"):
        proxy.receive_share(make_owner(p, oid).share(np.full((3, 2), 0.3) * (1 + int(oid))))
    proxy.close_collection()
    state = proxy.state_bytes()
    ledger_path = tmp_path / "ledger.json"
    first = Proxy.from_state(p, user.owner_keys, state, ledger=ReleaseLedger(ledger_path))
    release = first.finish(epsilon=1.0, delta=1e-5)
    # a new proxy object (as a new process would build) on the same state and ledger file
    again = Proxy.from_state(p, user.owner_keys, state, ledger=ReleaseLedger(ledger_path))
    with pytest.raises(ProtocolError, match="must be released once"):
        again.finish(epsilon=1.0, delta=1e-5)
    # a proxy that lost its ledger releases again: the data user's own ledger refuses the second one
    second = Proxy.from_state(p, user.owner_keys, state).finish(epsilon=1.0, delta=1e-5)
    user.ledger = ReleaseLedger(tmp_path / "user-ledger.json")
    assert decrypted == []  # the proxies decrypt nothing
    user.reconstruct(release)
    once = len(decrypted)
    assert once >= 1
    user.reconstruct(release)  # the same release again reveals nothing new
    assert len(decrypted) == 2 * once
    fresh = DataUser(user.private_key, p, owner_keys=user.owner_keys, ledger=ReleaseLedger(tmp_path / "user-ledger.json"))
    with pytest.raises(ProtocolError, match="must be released once"):
        fresh.reconstruct(second)
    assert len(decrypted) == 2 * once  # the second release was refused by the ledger before any decryption
    assert list(ReleaseLedger(ledger_path).releases()) == [p.session_id]


# -- 4. sizes are checked before allocation --------------------------------------------------------

def test_a_small_share_declaring_a_huge_d_allocates_nothing(make_user, make_owner, identity):
    user = make_user()
    p = user.params
    share = make_owner(p, "alice").share(np.full((3, 2), 0.2))
    m = Message.from_bytes(share)
    for d, err, match in ((3000, MessageError, "must hold"), (30000, DataError, "max_features=4096"),
                          (10 ** 6, DataError, "max_features=4096")):
        st = ShareStatement.sign(identity("alice"), session=p.session_id, key_fingerprint=p.key_fingerprint, d=d,
                                 n_rows=3, ciphertext_sha256=ciphertext_digest(m.sections))
        forged = _rewrap(share, meta={"d": d, "statement": st.to_json()})
        tracemalloc.start()
        try:
            with pytest.raises(err, match=match):
                Proxy(p, user.owner_keys).receive_share(forged)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 5 * len(share) + (1 << 20), peak  # a few copies of the message, not O(d^2)


# -- 6. the owner's own key policy ----------------------------------------------------------------

def test_owner_refuses_a_weak_key_even_if_public_json_says_insecure(make_user, identity):
    from dpdpca.protocol import DataOwner

    user = make_user()
    public = user.params.to_json()
    assert public["dpdpca_protocol"]["insecure_test_key"] is True  # what the data user wrote
    params = ProtocolParams.from_json(public, insecure_test_key=True)
    with pytest.raises(InsecureKeyError, match="key bits must be >= 2048 for an owner to encrypt"):
        DataOwner(params, identity("1"))
    DataOwner(params, identity("1"), insecure_test_key=True)  # the owner's own, explicit choice


def test_every_loader_refuses_a_weak_key_its_party_did_not_ask_for(make_user, tmp_path):
    """A data user publishing a 768-bit key marked ``insecure_test_key`` in public.json: the file's own word
    exempts nobody; every loader (library, CLI public and private, a pool worker's context) accepts it only on
    its caller's insecure_test_key=True, and a caller's flag alone does not accept a key the file does not
    declare insecure."""
    import json

    from dpdpca._io import atomic_write_json
    from dpdpca.commands.protocol_options import load_private, load_public
    from dpdpca.protocol.intake import IntakeContext
    from dpdpca.protocol.params import PARAMS_KEY

    user = make_user()
    public = user.params.to_json()
    assert public[PARAMS_KEY]["insecure_test_key"] is True and public["bits"] == 768
    with pytest.raises(InsecureKeyError, match=r"^public key bits must be >= 2048 unless the caller passes "
                                               r"insecure_test_key=True \(CLI --insecure-test-key\), got 768 "):
        ProtocolParams.from_json(public)
    assert ProtocolParams.from_json(public, insecure_test_key=True) == user.params
    atomic_write_json(tmp_path / "public.json", public)
    atomic_write_json(tmp_path / "private.json", {**user.private_key.to_json(), PARAMS_KEY: public[PARAMS_KEY]},
                      mode=0o600)
    for load, path in ((load_public, "public.json"), (load_private, "private.json")):
        with pytest.raises(InsecureKeyError, match="^public key bits must be >= 2048 unless this party passes "
                                                   "--insecure-test-key, got 768"):
            load(str(tmp_path / path))
        load(str(tmp_path / path), insecure_test_key=True)
    sk, params = load_private(str(tmp_path / "private.json"), insecure_test_key=True)
    assert params.public_key == user.params.public_key and sk.public_key == user.params.public_key
    # both consents needed: the file's flag false, the caller's true: refused, naming the file's field
    undeclared = json.loads(json.dumps(public))
    undeclared[PARAMS_KEY]["insecure_test_key"] = False
    with pytest.raises(InsecureKeyError, match=r"dpdpca_protocol.insecure_test_key must be true .*768-bit key.*"
                                               r"got false"):
        ProtocolParams.from_json(undeclared, insecure_test_key=True)
    # a pool worker reads back what its parent accepted, without deciding again
    ctx = IntakeContext(ProtocolParams.from_json(public, insecure_test_key=True), user.owner_keys, "add-remove", 64)
    assert IntakeContext.from_bytes(ctx.to_bytes()).params == user.params


# -- 8. rerandomization independent of the owners' encryptor --------------------------------------

def _jacobi(c: int, n: int) -> int:
    # c = (1 + m n) rho^n mod n^2, so c = rho^n (mod n) and J(c mod n) = J(rho)^n = J(rho):
    # the Jacobi symbol of a ciphertext's randomness is public.
    return int(gmpy2.jacobi(int(c) % n, n))


def test_djn_rerandomization_keeps_the_jacobi_symbol_and_full_does_not(keypair):
    pk, _ = keypair
    n = int(pk.n)
    r0 = next(r for r in range(2, 1000) if gmpy2.jacobi(r, n) == -1)
    phe_key = phe.PaillierPublicKey(n)
    from dpdpca.crypto import SlotLayout

    layout = SlotLayout(slot_bits=64, slots=1)
    arr = EncryptedArray(pk, layout, [1] * 400, 5, [phe_key.raw_encrypt(3, r_value=r0)] * 400)
    assert {_jacobi(c, n) for c in arr.rerandomize(method="djn").ciphertexts} == {-1}
    signs = [_jacobi(c, n) for c in arr.rerandomize(method="standard").ciphertexts]
    assert stats.binomtest(signs.count(1), len(signs), 0.5).pvalue > 1e-4


def _phe_share(share: bytes, params: ProtocolParams, private_key, ident: OwnerIdentity, r0: int) -> bytes:
    """The same share as an owner using python-paillier would send it: every ciphertext (1 + m n) r0^n."""
    m = Message.from_bytes(share)
    phe_key = phe.PaillierPublicKey(int(params.public_key.n))
    sections = {}
    for name, body in m.sections.items():
        arr = EncryptedArray.from_bytes(body, params.public_key)
        plain = private_key.raw_decrypt(arr.ciphertexts)
        cts = [phe_key.raw_encrypt(int(x), r_value=r0) for x in plain]
        sections[name] = EncryptedArray(params.public_key, arr.layout, arr.chunks, arr.bound, cts).to_bytes()
    st = ShareStatement.from_json(m.meta["statement"])
    signed = ShareStatement.sign(ident, session=params.session_id, key_fingerprint=params.key_fingerprint,
                                 d=st.d, n_rows=st.n_rows, ciphertext_sha256=ciphertext_digest(sections))
    return _rewrap(share, meta={"statement": signed.to_json()}, sections=sections)


def test_proxy_output_randomness_is_independent_of_phe_made_owner_ciphertexts(make_user, make_owner, identity):
    """Owners encrypt with phe and r0 of Jacobi symbol -1: without fresh full randomness every v' ciphertext
    the user receives has J = -1 and R'' ciphertexts have J = (-1)^(function of the mask's parities)."""
    user = make_user()
    p = user.params
    n = int(p.public_key.n)
    rng = np.random.default_rng(12)
    signs: list[int] = []
    for _run in range(8):  # 9 ciphertexts per run with the wide layout at 768 bits
        r0s = [next(r for r in range(2 + 50 * k, 2000) if gmpy2.jacobi(r, n) == -1) for k in range(2)]
        shares = [_phe_share(make_owner(p, oid).share(rng.uniform(-0.3, 0.3, size=(5, 8))), p, user.private_key,
                             identity(oid), r0) for oid, r0 in zip(("1", "2"), r0s)]
        proxy = Proxy(p, user.owner_keys, quorum=2)
        for s in shares:
            proxy.receive_share(s)
        proxy.close_collection()
        result = Message.from_bytes(proxy.finish(epsilon=1.0, delta=1e-5))
        for name in ("R2", "v2"):
            signs += [_jacobi(c, n) for c in EncryptedArray.from_bytes(result.section(name), p.public_key).ciphertexts]
    assert len(signs) >= 60
    assert stats.binomtest(signs.count(1), len(signs), 0.5).pvalue > 1e-4


def test_owner_ignores_the_djn_base_in_public_json(make_user, make_owner):
    """A data user publishing hs = 1 would make DJN ciphertexts 1 + m n (anyone reads m); owners draw their own."""
    user = make_user()
    public = user.params.to_json()
    public["hs"] = base64.urlsafe_b64encode(b"\x01").decode().rstrip("=")
    rigged = ProtocolParams.from_json(public, insecure_test_key=True)
    assert int(rigged.public_key.hs) == 1
    share = Message.from_bytes(make_owner(rigged, "1").share(np.full((3, 2), 0.25)))
    n = int(rigged.public_key.n)
    cts = EncryptedArray.from_bytes(share.section("v"), rigged.public_key).ciphertexts
    assert all((int(c) - 1) % n != 0 for c in cts)  # not of the form 1 + m n: randomized
    assert len(set(int(c) for c in cts)) == len(cts)


# -- limits: what a deviating party can still do (each shown to work) -------------------------------

def test_limit_a_proxy_that_skips_the_noise_is_not_detected(make_user, make_owner, monkeypatch, unit_rows):
    from dpdpca.dp import DiscreteGaussianMechanism
    from dpdpca.protocol.rounds import reference_scatter_int

    rng = np.random.default_rng(20)
    user = make_user()
    parts = [unit_rows(rng, 5, 3), unit_rows(rng, 6, 3)]
    proxy = Proxy(user.params, user.owner_keys, quorum=2)
    for oid, X in zip(("1", "2"), parts):
        proxy.receive_share(make_owner(user.params, oid).share(X))
    proxy.close_collection()
    monkeypatch.setattr(DiscreteGaussianMechanism, "sample_symmetric_upper", lambda self, d: [0] * (d * (d + 1) // 2))
    M, _, report, _ = user.reconstruct(proxy.finish(epsilon=1.0, delta=1e-5))
    ref = reference_scatter_int(parts, frac_bits=16, clip=True)
    assert all(int(M[i, j]) == int(ref[i, j]) for i in range(3) for j in range(3))  # the exact scatter
    assert report.epsilon == 1.0  # and still labelled DP: the user cannot tell


def test_limit_an_owner_can_misstate_its_count(make_user, identity):
    """Owner "1" has 6 rows and signs N_l = 2: accepted (the proxy cannot count encrypted rows)."""
    from dpdpca.protocol import DataOwner

    user = make_user()
    p = user.params
    honest = Message.from_bytes(DataOwner(p, identity("1"), insecure_test_key=True, release="centred").share(np.full((6, 2), 0.2)))
    st = ShareStatement.from_json(honest.meta["statement"])
    lie = ShareStatement.sign(identity("1"), session=p.session_id, key_fingerprint=p.key_fingerprint, d=2, n_rows=2,
                              ciphertext_sha256=st.ciphertext_sha256)
    proxy = Proxy(p, user.owner_keys, quorum=1)
    proxy.receive_share(_rewrap(honest.to_bytes(), meta={"statement": lie.to_json()}))
    assert proxy.close_collection() == 2


def test_limit_a_listed_owner_can_resubmit_rerandomized_copies(make_user, make_owner, identity):
    """bob multiplies alice's ciphertexts by encryptions of 0 and signs them: not identical, so accepted."""
    user = make_user()
    p = user.params
    alice = make_owner(p, "alice").share(np.full((4, 3), 0.2))
    m = Message.from_bytes(alice)
    sections = {name: EncryptedArray.from_bytes(body, p.public_key).rerandomize().to_bytes()
                for name, body in m.sections.items()}
    st = ShareStatement.sign(identity("bob"), session=p.session_id, key_fingerprint=p.key_fingerprint, d=3,
                             n_rows=4, ciphertext_sha256=ciphertext_digest(sections))
    proxy = Proxy(p, user.owner_keys)
    proxy.receive_share(alice)
    proxy.receive_share(_rewrap(alice, owner_id="bob", meta={"statement": st.to_json()}, sections=sections))
    assert proxy.received == ["alice", "bob"]


def test_every_test_the_threat_model_names_exists():
    """docs/threat-model.md backs each claim with a test: each name it gives must be a test here."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "threat-model.md").read_text()
    defined = {m for f in (root / "tests").rglob("test_*.py") for m in re.findall(r"^def (test_\w+)", f.read_text(), re.M)}
    named = set(re.findall(r"\b(test_[a-z0-9_]+)(?!\.py)\b", doc)) - {"test_key"}
    named = {n for n in named if not n.startswith("test_protocol_")}
    assert len(named) >= 20
    assert named <= defined, sorted(named - defined)


def test_ledger_claims_race_and_only_one_wins(tmp_path):
    """Eight concurrent claims of one session with different releases: exactly one is recorded."""
    import threading

    path = tmp_path / "ledger.json"
    results: list[object] = []

    def claim(i: int) -> None:
        try:
            results.append(ReleaseLedger(path).claim("ab" * 16, role="proxy", digest=f"{i:064x}"))
        except ProtocolError as exc:
            results.append(exc)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1 and sum(isinstance(r, ProtocolError) for r in results) == 7
    assert len(ReleaseLedger(path).releases()) == 1


def test_a_lock_removed_by_a_refused_holder_still_excludes_its_waiters(tmp_path):
    """exclusive_lock removes the lock file (and the directory it made) when the locked file was never written (a
    refused command leaves nothing behind); a waiter that locked the removed file must notice and lock the new one,
    or two holders would be inside at once.  Twelve threads that all write nothing: never two inside together."""
    import threading
    import time

    from dpdpca._io import exclusive_lock

    path = tmp_path / "new" / "ledger.json"
    inside, most, errors = [0], [0], []
    guard = threading.Lock()

    def refuse() -> None:
        try:
            for _ in range(5):
                with exclusive_lock(path):
                    with guard:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    time.sleep(0.002)
                    with guard:
                        inside[0] -= 1
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=refuse) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and most[0] == 1
    # nothing written: no lock file left (the directory too is removed, unless a concurrent holder's lock file
    # was in it at that moment: then an empty directory may remain)
    assert not path.parent.exists() or list(path.parent.iterdir()) == []


def test_keygen_refuses_to_overwrite_without_force(tmp_path, capsys):
    import json

    from dpdpca.cli import main

    argv = ["keygen", "--out-dir", str(tmp_path), "--key-bits", "512", "--insecure-test-key"]
    assert main(argv) == 0
    first = json.loads((tmp_path / "private.json").read_text())["p"]
    assert main(argv) == 2 and "pass --force to overwrite" in capsys.readouterr().err
    assert json.loads((tmp_path / "private.json").read_text())["p"] == first
    assert main([*argv, "--force"]) == 0
    assert json.loads((tmp_path / "private.json").read_text())["p"] != first


def test_many_statements_checked_on_two_threads_catch_every_forgery_in_the_serial_order():
    from dpdpca.protocol.counts import THREADED_VERIFY_MIN, check_statements

    session, fp = "ab" * 16, "cd" * 32
    ids = [OwnerIdentity.generate(f"o{i}") for i in range(2 * THREADED_VERIFY_MIN)]
    ring = OwnerKeyring.from_identities(ids)
    sts = [ShareStatement.sign(i, session=session, key_fingerprint=fp, d=5, n_rows=None,
                               ciphertext_sha256="e" * 64).to_json() for i in ids]

    def check(statements):
        return check_statements(statements, ring, session=session, key_fingerprint=fp, d=5, max_owners=1000,
                                counted=False)

    assert [st.owner_id for st in check(sts)] == [i.owner_id for i in ids]
    forged = dict(sts[-3], ciphertext_sha256="f" * 64)  # in the second thread's half
    with pytest.raises(AuthenticationError, match="owner 'o61' must verify"):
        check(sts[:-3] + [forged] + sts[-2:])
    # a forgery early and a duplicate later: the forgery is named, as a serial check names it
    with pytest.raises(AuthenticationError, match="owner 'o2' must verify"):
        check(sts[:2] + [dict(sts[2], signature=sts[3]["signature"])] + sts[3:] + [sts[0]])
    with pytest.raises(ProtocolError, match="unique"):
        check(sts + [sts[0]])


def test_statements_already_parsed_are_verified_as_their_json_is():
    """The proxy's intake hands check_statements the ShareStatement it parsed: its signature is checked all the
    same (a parsed forgery is refused), and so are d and the count."""
    from dpdpca.protocol.counts import check_statements

    session, fp = "ab" * 16, "cd" * 32
    ident = OwnerIdentity.generate("o1")
    ring = OwnerKeyring.from_identities([ident])
    st = ShareStatement.sign(ident, session=session, key_fingerprint=fp, d=5, n_rows=None, ciphertext_sha256="e" * 64)

    def check(statement, d=5):
        return check_statements([statement], ring, session=session, key_fingerprint=fp, d=d, max_owners=4,
                                counted=False)

    assert check(st) == check(st.to_json()) == [st]
    forged = ShareStatement.from_json(dict(st.to_json(), ciphertext_sha256="f" * 64))
    with pytest.raises(AuthenticationError, match="owner 'o1' must verify"):
        check(forged)
    with pytest.raises(MessageError, match="must have d=6"):
        check(st, d=6)
