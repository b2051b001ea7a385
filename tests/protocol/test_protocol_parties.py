"""Who holds what, rejected messages and data, dropout, and the mask's hiding."""

from __future__ import annotations

import gc
import hashlib

import numpy as np
import pytest
from scipy import stats

from centred_parties import Proxy, centred_owners
from dpdpca.crypto import EncryptedArray, PrivateKey
from dpdpca.errors import DataError, KeyMismatchError, MessageError, OverflowRiskError, ParameterError, ProtocolError
from dpdpca.protocol import DataUser, InProcessTransport, ProtocolParams, run_protocol
from dpdpca.protocol.counts import ShareStatement, ciphertext_digest
from dpdpca.protocol.messages import Message
from dpdpca.protocol.ledger import ReleaseLedger
from dpdpca.protocol.masking import draw_mask, mask_bound
from dpdpca.protocol.runner import reference_scatter_int
from dpdpca.protocol.sections import share_sections


# These tests attack and check the Wang-Chang (centred) release (centred_parties.py says why).
@pytest.fixture
def make_owner(make_owner):
    return centred_owners(make_owner)


@pytest.fixture
def _shares(make_owner):
    def make(params, parts, ids=None):
        ids = ids or [str(i + 1) for i in range(len(parts))]
        return [make_owner(params, oid).share(X) for oid, X in zip(ids, parts)]
    return make


def _reachable(root, depth=6):
    """Every object reachable from ``root`` through attributes and containers."""
    seen, frontier, out = {id(root)}, [root], []
    for _ in range(depth):
        nxt = []
        for obj in frontier:
            for ref in gc.get_referents(obj):
                if id(ref) not in seen and not isinstance(ref, type) and type(ref).__name__ != "module":
                    seen.add(id(ref))
                    out.append(ref)
                    nxt.append(ref)
        frontier = nxt
    return out


def test_proxy_never_holds_the_secret_key(make_user, unit_rows, _shares):
    rng = np.random.default_rng(0)
    user = make_user()
    sk = user.private_key
    parts = [unit_rows(rng, 6, 3) for _ in range(3)]
    proxy = Proxy(user.params, user.owner_keys, quorum=3)
    for share in _shares(user.params, parts):
        proxy.receive_share(share)
    proxy.close_collection()
    proxy.finish(epsilon=1.0, delta=1e-5)
    secrets = {int(sk.p), int(sk.q)}
    for obj in _reachable(proxy):
        assert not isinstance(obj, (PrivateKey, DataUser))
        if isinstance(obj, int) or type(obj).__name__ == "mpz":
            assert int(obj) not in secrets
    # and the parameters it is built from are public: they serialize without p or q
    text = str(user.params.to_json())
    assert all(str(s) not in text for s in secrets)


def test_user_never_receives_an_individual_share_and_sends_nothing(make_user, unit_rows, _shares):
    rng = np.random.default_rng(1)
    parts = [unit_rows(rng, n, 4) for n in (5, 9, 2)]
    net = InProcessTransport()
    run = run_protocol(parts, n_components=1, user=make_user(), transport=net, key_bits=768, insecure_test_key=True)
    to_user = [(s, r) for s, r, _ in net.log if r == "user"]
    assert to_user == [("proxy", "user")]
    assert all(s.startswith("owner:") for s, r, _ in net.log if r == "proxy")
    assert not [s for s, _, _ in net.log if s == "user"]  # the data user answers nothing: no oracle
    assert not [r for _, r, _ in net.log if r.startswith("owner:")]  # owners receive nothing
    assert run.result.extra["n_rows"] == 16  # the user learns only the total N
    # and a user handed an owner's share refuses it
    user = make_user()
    share = _shares(user.params, parts[:1])[0]
    with pytest.raises(ProtocolError, match="type must be MASKED_RESULT"):
        user.finish(share, n_components=1)


def test_dropout_two_of_ten_owners_missing(make_user, unit_rows):
    rng = np.random.default_rng(3)
    parts = [unit_rows(rng, 4 + i, 3) for i in range(10)]
    run = run_protocol(parts, n_components=2, absent_owners=[2, 7], quorum=8, deadline_s=0.05, verify=True,
                       release="centred",
                       user=make_user(), key_bits=768, insecure_test_key=True)
    present = [p for i, p in enumerate(parts) if i not in (2, 7)]
    assert run.owners_present == ["1", "2", "4", "5", "6", "7", "9", "10"]
    assert run.result.extra["n_rows"] == sum(p.shape[0] for p in present)
    assert run.verify["max_abs_integer_error"] == 0  # S-bar covers exactly the 8 present
    ref8 = reference_scatter_int(present, frac_bits=16, clip=True)
    noise = run.noise_for_testing
    assert int(run.noisy_scatter_int[0, 1]) - noise[1] == int(ref8[0, 1])


def test_quorum_not_reached_and_late_shares(make_user, unit_rows, _shares):
    rng = np.random.default_rng(4)
    user = make_user()
    shares = _shares(user.params, [unit_rows(rng, 3, 2) for _ in range(3)])
    proxy = Proxy(user.params, user.owner_keys, quorum=3)
    proxy.receive_share(shares[0])
    with pytest.raises(ProtocolError, match="quorum of 3, got 1"):
        proxy.close_collection()
    proxy = Proxy(user.params, user.owner_keys, quorum=2)
    proxy.receive_share(shares[0])
    proxy.receive_share(shares[1])
    proxy.close_collection()
    with pytest.raises(ProtocolError, match="late"):
        proxy.receive_share(shares[2])


def test_duplicate_and_replayed_shares_are_rejected(make_user, unit_rows, _shares, make_owner):
    rng = np.random.default_rng(5)
    user = make_user()
    X = unit_rows(rng, 3, 2)
    proxy = Proxy(user.params, user.owner_keys)
    share = _shares(user.params, [X])[0]
    proxy.receive_share(share)
    with pytest.raises(ProtocolError, match="duplicate or replayed"):
        proxy.receive_share(share)  # replay of the same bytes
    with pytest.raises(ProtocolError, match="duplicate or replayed"):
        proxy.receive_share(make_owner(user.params, "1").share(X * 0.5))  # same id, new data
    other_session = ProtocolParams.create(user.params.public_key, release="any", max_owners=10, max_rows_per_owner=64)
    with pytest.raises(ProtocolError, match="another session"):
        Proxy(user.params, user.owner_keys).receive_share(make_owner(other_session, "9").share(X))


@pytest.mark.parametrize("release, section, index", [("centred", "R", 1), ("centred", "v", 0),
                                                      ("add-remove", "v", 0), ("add-remove", "N", 0)])
def test_a_signed_share_with_one_non_unit_ciphertext_is_refused_by_name(make_user, make_owner, identity, keypair,
                                                                        release, section, index):
    """A listed owner's share, validly signed, carrying a multiple of a prime factor of n: refused, named."""
    user = make_user()
    p, sk = user.params, keypair[1]
    X = np.full((3, 4), 0.3)
    good = make_owner(p, "1", release=release).share(X)
    m = Message.from_bytes(good)
    body = m.sections[section][:-32]
    width = p.public_key.ciphertext_bytes
    count = len(EncryptedArray.from_bytes(m.sections[section], p.public_key).ciphertexts)
    start = len(body) - (count - index) * width
    non_unit = (int(sk.p) * 12345).to_bytes(width, "big")  # in [1, n**2), shares the factor p with n
    body = body[:start] + non_unit + body[start + width:]
    sections = dict(m.sections, **{section: body + hashlib.sha256(body).digest()})
    st = m.meta["statement"]
    signed = ShareStatement.sign(identity("1"), session=p.session_id, key_fingerprint=p.key_fingerprint, d=4,
                                 n_rows=None if release == "add-remove" else 3,
                                 ciphertext_sha256=ciphertext_digest(sections, share_sections(release)))
    assert signed.ciphertext_sha256 != st["ciphertext_sha256"]
    bad = Message(m.type, m.session, m.key_fingerprint, m.sender, dict(m.meta, statement=signed.to_json()),
                  sections).to_bytes()
    proxy = Proxy(p, user.owner_keys, release=release)
    with pytest.raises(MessageError, match=rf"^section {section}: message ciphertext\[{index}\] must be a unit "
                                           rf"modulo n, got a non-unit$"):
        proxy.receive_share(bad)
    assert proxy.received == []  # nothing of it was kept: the owner's honest share still goes through
    assert proxy.receive_share(good) == "1"


def test_wrong_key_tampered_and_foreign_messages(make_user, unit_rows, other_keypair, _shares, make_owner):
    rng = np.random.default_rng(6)
    user = make_user()
    X = unit_rows(rng, 3, 2)
    foreign = ProtocolParams.create(other_keypair[0], release="any", max_owners=10, max_rows_per_owner=64,
                                    session_id=user.params.session_id)
    with pytest.raises(KeyMismatchError):
        Proxy(user.params, user.owner_keys).receive_share(make_owner(foreign, "1").share(X))
    share = bytearray(_shares(user.params, [X])[0])
    share[len(share) // 2] ^= 0x40
    with pytest.raises(MessageError, match="digest"):
        Proxy(user.params, user.owner_keys).receive_share(bytes(share))
    with pytest.raises(MessageError, match="truncated"):
        Proxy(user.params, user.owner_keys).receive_share(bytes(share[:20]))
    with pytest.raises(KeyMismatchError, match="private key must match"):
        DataUser(other_keypair[1], user.params)


def test_owner_data_errors(make_user, make_owner):
    user = make_user(max_rows_per_owner=4)
    owner = make_owner(user.params, "1", clip=False)
    with pytest.raises(DataError, match="finite"):
        owner.share(np.array([[0.1, np.nan]]))
    with pytest.raises(DataError, match="finite"):
        owner.share(np.array([[0.1, np.inf]]))
    with pytest.raises(DataError, match="at least 1 row"):
        owner.share(np.zeros((0, 3)))
    with pytest.raises(DataError, match="norm <= 1 with clipping off"):
        owner.share(np.array([[0.6, 0.81]]))
    with pytest.raises(OverflowRiskError, match="max_rows_per_owner=4"):
        owner.share(np.zeros((5, 2)))
    clipped = make_owner(user.params, "2", clip=True)
    clipped.share(np.array([[3.0, 4.0], [0.1, 0.1]]))
    assert clipped.rows_clipped_ == 1


def test_owners_with_different_d_and_too_many_owners(make_user, unit_rows, make_owner):
    rng = np.random.default_rng(7)
    user = make_user(max_owners=2)
    proxy = Proxy(user.params, user.owner_keys, quorum=2)
    proxy.receive_share(make_owner(user.params, "a").share(unit_rows(rng, 2, 3)))
    with pytest.raises(DataError, match="d=3 features, got d=4"):
        proxy.receive_share(make_owner(user.params, "b").share(unit_rows(rng, 2, 4)))
    proxy.receive_share(make_owner(user.params, "c").share(unit_rows(rng, 2, 3)))
    with pytest.raises(OverflowRiskError, match="max_owners=2"):
        proxy.receive_share(make_owner(user.params, "d").share(unit_rows(rng, 2, 3)))
    with pytest.raises(OverflowRiskError, match="max_owners=2"):
        run_protocol([unit_rows(rng, 2, 3)] * 3, n_components=1, max_owners=2, key_bits=768,
                     insecure_test_key=True)


@pytest.mark.parametrize("packing,match", [("plain", "max_abs must fit one slot"),
                                           ("wide", "final_abs must fit one slot")])
def test_key_too_small_for_the_declared_bounds(packing, match):
    from dpdpca.crypto import generate_keypair
    from dpdpca.protocol.params import MAX_OWNERS, MAX_ROWS_PER_OWNER

    small = generate_keypair(128, insecure_test_key=True)[0]  # too small for the largest declarable bounds
    with pytest.raises(OverflowRiskError, match=match):
        ProtocolParams.create(small, release="any", max_owners=MAX_OWNERS, max_rows_per_owner=MAX_ROWS_PER_OWNER,
                              packing=packing)
    mid = generate_keypair(512, insecure_test_key=True)[0]  # its slots fit M, not the carries at kappa = 256
    with pytest.raises(OverflowRiskError, match="carry_abs must fit one slot below n/2"):
        ProtocolParams.create(mid, release="any", max_owners=MAX_OWNERS, max_rows_per_owner=MAX_ROWS_PER_OWNER,
                              kappa=256)


def test_budget_and_component_errors(make_user, unit_rows):
    rng = np.random.default_rng(8)
    parts = [unit_rows(rng, 4, 3)]
    common = dict(user=make_user(), key_bits=768, insecure_test_key=True)
    for kwargs, match in [(dict(epsilon=0.0), "epsilon must be > 0"), (dict(epsilon=-1.0), "epsilon must be > 0"),
                          (dict(delta=0.0), "delta must be in"), (dict(delta=1.0), "delta must be in"),
                          (dict(n_components=0), "n_components must be >= 1"),
                          (dict(n_components=4), "n_components must be <= 3"),
                          (dict(neighbouring="add/remove-one", release="centred"), "releases N exactly"),
                          (dict(neighbouring="replace-one"), "'add/remove-one' for release 'add-remove'"),
                          (dict(noise_lattice="real"), "noise_lattice")]:
        args = dict(n_components=1, **common)
        args.update(kwargs)
        with pytest.raises(ParameterError, match=match):
            run_protocol(parts, **args)


def test_epsilon_below_the_declared_allowance_raises_overflow_risk(make_user, unit_rows):
    rng = np.random.default_rng(9)
    user = make_user(min_epsilon=0.5, min_delta=1e-6)
    with pytest.raises(OverflowRiskError, match="epsilon must be large enough .* got 0.001"):
        run_protocol([unit_rows(rng, 4, 2)], n_components=1, epsilon=0.001, delta=1e-6, user=user,
                     key_bits=768, insecure_test_key=True, release="centred")


def test_rounds_out_of_order(make_user, unit_rows):
    user = make_user()
    proxy = Proxy(user.params, user.owner_keys)
    with pytest.raises(ProtocolError, match="follow close_collection"):
        proxy.finish(epsilon=1.0, delta=1e-5)
    with pytest.raises(ProtocolError, match="quorum"):
        proxy.close_collection()


def test_mask_hides_v_statistically():
    """v' = v + b for two very different v: indistinguishable, also modulo N (KS, p > 1e-4)."""
    from dpdpca.dp import resolve_source

    n, f, kappa, samples = 7, 16, 40, 4000
    src = resolve_source(None)
    b = np.array([draw_mask(1, n, frac_bits=f, kappa=kappa, source=src)[0] for _ in range(2 * samples)],
                 dtype=object)
    bound = mask_bound(n, frac_bits=f, kappa=kappa)
    v_a, v_b = -(n << f), (n << f) - 3  # extreme sums, different residues mod N
    va = [float(x + v_a) / bound for x in b[:samples]]
    vb = [float(x + v_b) / bound for x in b[samples:]]
    assert stats.ks_2samp(va, vb).pvalue > 1e-4
    # modulo N: a mask drawn as N*b~ would make v' mod N constant; ours is uniform for both.
    ra = [int(x + v_a) % n for x in b[:samples]]
    rb = [int(x + v_b) % n for x in b[samples:]]
    for r in (ra, rb):
        counts = np.bincount(r, minlength=n)
        assert stats.chisquare(counts).pvalue > 1e-4


def test_mask_is_drawn_from_the_full_range():
    b = draw_mask(64, 5, frac_bits=16, kappa=40)
    bound = mask_bound(5, frac_bits=16, kappa=40)
    assert all(-bound <= x <= bound for x in b)
    assert max(abs(x) for x in b) > bound // 4  # 64 uniform draws: all below B/4 has prob 2**-64


def test_proxy_proceeds_at_the_quorum_and_excludes_later_shares(make_user, unit_rows):
    rng = np.random.default_rng(10)
    parts = [unit_rows(rng, 3 + i, 2) for i in range(5)]
    run = run_protocol(parts, n_components=1, quorum=3, verify=True, user=make_user(), key_bits=768,
                       insecure_test_key=True)
    assert run.owners_present == ["1", "2", "3"]
    assert run.result.extra["n_rows"] == 3 + 4 + 5
    assert run.verify["max_abs_integer_error"] == 0  # against exactly the three accepted owners
    assert run.extra["late_shares_rejected"] == 2


@pytest.mark.slow
def test_v_prime_from_two_datasets_is_indistinguishable_end_to_end(make_user, make_owner):
    """The user's v' for two very different datasets (same N): KS on v', chi-square on v' mod N (p > 1e-4)."""
    user = make_user(max_owners=1, max_rows_per_owner=7)
    p = user.params
    datasets = {"plus": np.full((7, 2), 0.7), "minus": np.full((7, 2), -0.7)}
    shares = {name: make_owner(p, "1").share(X) for name, X in datasets.items()}
    bound = mask_bound(7, frac_bits=p.frac_bits, kappa=p.kappa)
    samples: dict[str, list[int]] = {name: [] for name in datasets}
    for _ in range(300):
        for name, share in shares.items():
            proxy = Proxy(p, user.owner_keys, quorum=1)
            proxy.receive_share(share)
            proxy.close_collection()
            user.ledger = ReleaseLedger()  # an experiment: many releases of one session, on purpose
            user.reconstruct(proxy.finish(epsilon=1.0, delta=1e-5))
            samples[name].append(int(user.masked_sum_[0]))
    v_plus, v_minus = int(7 * np.trunc(0.7 * 2 ** 16)), -int(7 * np.trunc(0.7 * 2 ** 16))
    assert all(-bound + v_plus <= x <= bound + v_plus for x in samples["plus"])
    assert all(-bound + v_minus <= x <= bound + v_minus for x in samples["minus"])
    a = [x / bound for x in samples["plus"]]
    b = [x / bound for x in samples["minus"]]
    assert stats.ks_2samp(a, b).pvalue > 1e-4
    for name in datasets:
        counts = np.bincount([x % 7 for x in samples[name]], minlength=7)
        assert stats.chisquare(counts).pvalue > 1e-4


def test_proxy_rerandomizes_what_the_user_receives(make_user, unit_rows, _shares):
    # Without fresh randomness, E[v'] = E[v window] * (1 + pack(b) n): the ratio of the
    # two ciphertexts would be 1 mod n, and the user (who can strip plaintexts with the
    # secret key) would see the owners' aggregated randomness reused under the mask.
    import gmpy2

    from dpdpca.crypto import EncryptedArray

    rng = np.random.default_rng(11)
    user = make_user()
    parts = [unit_rows(rng, 5, 7) for _ in range(2)]
    proxy = Proxy(user.params, user.owner_keys, quorum=2)
    for s in _shares(user.params, parts):
        proxy.receive_share(s)
    proxy.close_collection()
    windows = (proxy._aggregate["v"].repack(user.params.v2_layout) if user.params.packing == "wide"
               else proxy._aggregate["v"].repack(user.params.layout))
    result = Message.from_bytes(proxy.finish(epsilon=1.0, delta=1e-5))
    v2 = EncryptedArray.from_bytes(result.sections["v2"], user.params.public_key)
    n, n2 = user.params.public_key.n, user.params.public_key.nsquare
    assert len(v2.ciphertexts) == len(windows.ciphertexts) >= 1
    for c_user, c_window in zip(v2.ciphertexts, windows.ciphertexts):
        assert int(c_user * gmpy2.invert(c_window, n2) % n2) % n != 1
    assert "rerandomize" in proxy.timings_.to_dict()["parties"]["proxy"]


@pytest.mark.parametrize("release", ["centred", "add-remove"])
def test_proxy_makes_its_rerandomizers_while_collection_is_open(make_user, unit_rows, make_owner, release):
    # prepare(d) makes r^n factors (centred, in the background) or DJN factors under the proxy's own
    # base (add/remove); finish uses them (each once) and books their CPU time as an overlapping
    # "precompute" phase, not as "rerandomize".
    import time

    from dpdpca.protocol.releases import as_release

    rng = np.random.default_rng(12)
    user = make_user()
    d = 4
    parts = [unit_rows(rng, 5, d) for _ in range(2)]
    proxy = Proxy(user.params, user.owner_keys, quorum=2, release=release)
    proxy.prepare(d)
    proxy.prepare(d)  # idempotent: one fill
    v_slots = None if release == "add-remove" else user.params.v2_layout.slots  # v' has its own layout
    want = as_release(release).result_ciphertexts(d, user.params.layout.slots, v_slots)
    stop = time.monotonic() + 30
    while proxy._randomizers.ready < want and time.monotonic() < stop:
        time.sleep(0.01)
    assert proxy._randomizers.ready == want
    for oid, X in zip(("1", "2"), parts):
        proxy.receive_share(make_owner(user.params, oid, release=release).share(X))
    proxy.close_collection()
    out = Message.from_bytes(proxy.finish(epsilon=1.0, delta=1e-5) if release == "centred"
                             else proxy.finish_add_remove(epsilon=1.0, delta=1e-5))
    sent = sum(len(EncryptedArray.from_bytes(out.section(name), user.params.public_key).ciphertexts)
               for name in out.sections)
    assert sent == want  # exactly the ciphertexts the release sends
    phases = proxy.timings_.to_dict()["parties"]["proxy"]
    assert phases["precompute"] > 0.0
    assert proxy._randomizers.ready == 0  # used or forgotten, never kept after the release
    sent = sum(len(out.sections[k]) for k in out.sections) // user.params.public_key.ciphertext_bytes
    assert sent >= want


@pytest.mark.parametrize("published_hs", ["derived", "one"])
def test_add_remove_outputs_get_a_djn_factor_under_the_proxys_own_base(keypair, test_keyring, unit_rows, make_owner,
                                                                       published_hs):
    # No secret exponent acts in the add/remove release, so the proxy needs no r^n made ahead;
    # it still multiplies every output by a fresh hs^alpha, under a base it draws itself:
    # with the published hs = 1 (a key holder's trap) the outputs would equal the aggregate
    # times (1 + G n), and whoever saw the owners' ciphertexts could read the noise G.
    import gmpy2

    from dpdpca.crypto import PublicKey

    pk, sk = keypair
    if published_hs == "one":
        pk = PublicKey(int(pk.n), 1, insecure_test_key=True)
    params = ProtocolParams.create(pk, release="any", max_owners=10, max_rows_per_owner=64)
    proxy = Proxy(params, test_keyring, quorum=2, release="add-remove")
    proxy.prepare(4)  # the DJN factors made ahead: under a base the proxy drew, never the published hs
    pool = proxy._randomizers
    assert pool.method == "djn" and pool.ready == pool._wanted > 0
    assert int(pool.public_key.n) == int(pk.n) and int(pool.public_key.hs) not in (int(pk.hs), 1)
    rng = np.random.default_rng(13)
    for oid in ("1", "2"):
        proxy.receive_share(make_owner(params, oid, release="add-remove").share(unit_rows(rng, 5, 4)))
    proxy.close_collection()
    agg = {k: list(a.ciphertexts) for k, a in proxy._aggregate.items()}
    out = Message.from_bytes(proxy.finish_add_remove(epsilon=1.0, delta=1e-5))
    n, n2 = pk.n, pk.nsquare
    for name in ("R", "v", "N"):
        sent = EncryptedArray.from_bytes(out.section(f"{name}2"), pk).ciphertexts
        assert len(sent) == len(agg[name]) >= 1
        for c_out, c_agg in zip(sent, agg[name]):
            ratio = int(c_out * gmpy2.invert(c_agg, n2) % n2)
            assert ratio % n != 1  # (1 + G n) alone would be 1 mod n
    assert proxy.timings_.to_dict()["parties"]["proxy"]["precompute"] > 0.0
    assert pool.ready == 0  # used or forgotten
