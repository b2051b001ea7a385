"""The proxy's parallel intake: shares checked and multiplied on a local pool give the serial outcome exactly."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import pytest

from dpdpca.crypto import local_process_pool
from dpdpca.errors import DpdpcaError
from dpdpca.protocol import Proxy
from dpdpca.protocol.counts import ShareStatement, ciphertext_digest
from dpdpca.protocol.intake import IntakeContext, error_from
from dpdpca.protocol.messages import Message
from dpdpca.protocol.runner import run_protocol
from dpdpca.protocol.sections import share_sections


@pytest.fixture(scope="module")
def pool():
    with local_process_pool(2) as ex:
        yield ex


def _resigned(p, identity, owner_id, msg, sections, release, n_rows):
    """``msg`` as owner ``owner_id``'s share over ``sections``, validly signed by that owner."""
    st = ShareStatement.sign(identity(owner_id), session=p.session_id, key_fingerprint=p.key_fingerprint,
                             d=int(msg.meta["d"]), n_rows=n_rows,
                             ciphertext_sha256=ciphertext_digest(sections, share_sections(release)))
    meta = dict(msg.meta, owner_id=owner_id, statement=st.to_json())
    return Message(msg.type, msg.session, msg.key_fingerprint, f"owner:{owner_id}", meta, sections).to_bytes()


def _hostile_batch(p, make_owner, identity, keypair, release):
    """Good shares mixed with every kind of bad one; each bad kind is refused by a different check."""
    rng = np.random.default_rng(11)
    n_rows = None if release == "add-remove" else 3

    def share(oid, d=4):
        return make_owner(p, oid, release=release).share(0.9 * rng.uniform(-1, 1, size=(3, d)) / np.sqrt(d))

    good = {oid: share(oid) for oid in ["1", "2", "3", "4", "5", "6", "8"]}
    tampered = bytearray(share("7"))
    tampered[len(tampered) // 2] ^= 0x10
    m3 = Message.from_bytes(good["3"])
    replay = _resigned(p, identity, "9", m3, m3.sections, release, n_rows)  # owner 9 signs owner 3's ciphertexts
    m8 = Message.from_bytes(good["8"])
    width = p.public_key.ciphertext_bytes
    body = m8.sections["v"][:-32]
    non_unit = (int(keypair[1].p) * 7).to_bytes(width, "big")
    body = body[:len(body) - width] + non_unit
    bad_unit = _resigned(p, identity, "8", m8, dict(m8.sections, v=body + hashlib.sha256(body).digest()),
                         release, n_rows)
    return [good["1"], good["2"], bytes(tampered), good["2"], good["3"], share("10", d=5), replay, bad_unit,
            good["4"], good["8"], good["5"], good["6"], good["1"]]


def _outcome(o):
    return (type(o).__name__, str(o)) if isinstance(o, DpdpcaError) else o


@pytest.mark.parametrize("release", ["add-remove", "centred"])
@pytest.mark.parametrize("expected", [None, 13])
def test_pool_intake_matches_the_serial_one_share_by_share(make_user, make_owner, identity, keypair, pool,
                                                            release, expected):
    """Same accepted owners, same errors (type and text), same aggregate ciphertexts, in one chunk or many."""
    user = make_user(release=release)
    p = user.params
    batch = _hostile_batch(p, make_owner, identity, keypair, release)
    serial = Proxy(p, user.owner_keys, quorum=1, release=release)
    want = [Proxy._try(serial.receive_share, data) for data in batch]
    parallel = Proxy(p, user.owner_keys, quorum=1, release=release, executor=pool)
    got = parallel.receive_shares(iter(batch), expected=expected)
    assert [_outcome(o) for o in got] == [_outcome(o) for o in want]
    kinds = [type(o).__name__ for o in want]
    assert kinds == ["str", "str", "MessageError", "ProtocolError", "str", "DataError", "ProtocolError",
                     "MessageError", "str", "str", "str", "str", "ProtocolError"]
    assert "unit modulo n" in str(want[7]) and "fresh" in str(want[6]) and "duplicate" in str(want[3])
    assert parallel.received == serial.received == ["1", "2", "3", "4", "8", "5", "6"]
    serial.close_collection()
    parallel.close_collection()
    for name in share_sections(release):
        assert parallel._aggregate[name].ciphertexts == serial._aggregate[name].ciphertexts
        assert parallel._aggregate[name].bound == serial._aggregate[name].bound


def test_a_share_refused_by_the_bookkeeping_is_divided_out(make_user, make_owner, pool):
    """Owner 1 twice in one chunk: the worker multiplies both in; the proxy refuses the second and divides it out."""
    user = make_user(release="add-remove")
    p = user.params
    first = make_owner(p, "1", release="add-remove").share(np.full((3, 4), 0.2))
    second = make_owner(p, "1", release="add-remove").share(np.full((3, 4), -0.3))
    parallel = Proxy(p, user.owner_keys, quorum=1, release="add-remove", executor=pool)
    got = parallel.receive_shares([first, second])
    assert got[0] == "1" and "duplicate" in str(got[1])
    parallel.close_collection()
    alone = Proxy(p, user.owner_keys, quorum=1, release="add-remove")
    alone.receive_share(first)
    alone.close_collection()
    for name in share_sections("add-remove"):
        assert parallel._aggregate[name].ciphertexts == alone._aggregate[name].ciphertexts
        assert parallel._aggregate[name].bound == alone._aggregate[name].bound


def test_intake_after_the_close_is_late_and_a_whole_run_on_the_pool_is_exact(make_user, make_owner, unit_rows,
                                                                              pool):
    user = make_user()
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=1, executor=pool)
    proxy.receive_shares([make_owner(p, "1").share(np.full((3, 2), 0.2))])
    proxy.close_collection()
    late = proxy.receive_shares([make_owner(p, "2").share(np.full((3, 2), 0.2))])
    assert "late" in str(late[0])
    rng = np.random.default_rng(3)
    parts = [unit_rows(rng, 5, 3) for _ in range(9)]
    run = run_protocol(parts, n_components=2, epsilon=1.0, delta=1e-5, key_bits=768, insecure_test_key=True,
                       executor=pool, verify=True)
    assert run.verify is not None and run.verify["max_abs_integer_error"] == 0  # the release is exact
    assert run.owners_present == [str(i) for i in range(1, 10)]


def test_context_round_trips_and_worker_errors_keep_their_class(make_user):
    user = make_user()
    ctx = IntakeContext(user.params, user.owner_keys, "centred", 100)
    back = IntakeContext.from_bytes(ctx.to_bytes())
    assert back.params.session_id == user.params.session_id and back.owner_keys.to_json() == ctx.owner_keys.to_json()
    assert b'"p"' not in ctx.to_bytes() and b'"q"' not in ctx.to_bytes()  # public parameters only
    assert type(error_from("AuthenticationError", "x")).__name__ == "AuthenticationError"
    assert type(error_from("os", "x")).__name__ == "ProtocolError"  # never an arbitrary attribute of the module


def test_the_first_share_accepted_fixes_d_on_the_pool_too(make_user, make_owner, pool):
    """A batch whose first share has another d than the rest: that share sets d, the others are refused, as serially."""
    user = make_user(release="add-remove")
    p = user.params
    batch = [make_owner(p, oid, release="add-remove").share(np.full((3, d), 0.2)) for oid, d in
             [("1", 5), ("2", 4), ("3", 4), ("4", 5), ("5", 4)]]
    serial = Proxy(p, user.owner_keys, quorum=1, release="add-remove")
    want = [_outcome(Proxy._try(serial.receive_share, data)) for data in batch]
    parallel = Proxy(p, user.owner_keys, quorum=1, release="add-remove", executor=pool)
    assert [_outcome(o) for o in parallel.receive_shares(batch, expected=5)] == want
    assert parallel.received == serial.received == ["1", "4"] and parallel.d == serial.d == 5
    serial.close_collection()
    parallel.close_collection()
    for name in share_sections("add-remove"):
        assert parallel._aggregate[name].ciphertexts == serial._aggregate[name].ciphertexts


def test_a_workers_replay_keys_are_read_back_from_the_shares_own_bytes(make_user, make_owner, identity):
    """A checked share says where its keys lie in its own bytes, whatever the order of its sections."""
    from dpdpca.protocol.intake import check_share, keys_from_ref

    user = make_user(release="add-remove")
    p = user.params
    data = make_owner(p, "1", release="add-remove").share(np.full((3, 4), 0.2))
    proxy = Proxy(p, user.owner_keys, quorum=1, release="add-remove")
    ctx = proxy._intake_context()
    share = check_share(data, ctx)
    ref, width = share.key_ref()
    keys = share.keys
    assert isinstance(ref, tuple) and width == p.public_key.ciphertext_bytes
    assert len(ref) == len(share.arrays)  # one run per section: the keys travel as a few offsets
    assert sum(length for _, length in ref) == len(keys) * width
    assert keys_from_ref(data, ref, width) == keys
    assert keys == [c.to_bytes(width, "big") for name in share.arrays for c in share.arrays[name].ciphertexts]
    msg = Message.from_bytes(data)  # the same share with its sections in reverse order
    backwards = Message(msg.type, msg.session, msg.key_fingerprint, msg.sender, msg.meta,
                        dict(reversed(list(msg.sections.items())))).to_bytes()
    share_b = check_share(backwards, ctx)
    assert share_b.keys == keys
    assert share_b.key_ref()[0] != ref  # the runs moved with the sections
    assert keys_from_ref(backwards, *share_b.key_ref()) == keys


def test_the_pool_workers_load_the_context_while_collection_is_open(make_user, make_owner, pool):
    """prepare() has every worker load the session's context (offline), timed as the proxy's precompute."""
    user = make_user(release="add-remove")
    p = user.params
    proxy = Proxy(p, user.owner_keys, quorum=1, release="add-remove", executor=pool)
    proxy.prepare(2, wait=True)
    loads = [f.result() for f in proxy._context_loads]
    assert len(loads) == 2 and max(cpu for _, cpu in loads) > 0
    before = proxy.timings_.to_dict()["parties"].get("proxy", {}).get("precompute", 0.0)
    assert proxy.receive_shares([make_owner(p, "1", release="add-remove").share(np.full((3, 2), 0.2))]) == ["1"]
    after = proxy.timings_.to_dict()["parties"]["proxy"]["precompute"]
    # per worker process its loads' sum, the largest of them (the workers load side by side)
    assert proxy._context_loads == []
    assert max(cpu for _, cpu in loads) - 1e-9 <= after - before <= sum(cpu for _, cpu in loads) + 1e-9


def test_the_intake_context_is_serialized_once_at_prepare_not_per_batch(make_user, make_owner, pool, monkeypatch):
    """The context's bytes are made when the proxy prepares (offline) and reused by every batch of shares."""
    from dpdpca.protocol.intake import IntakeContext

    user = make_user(release="add-remove")
    p = user.params
    made = []
    to_bytes = IntakeContext.to_bytes
    monkeypatch.setattr(IntakeContext, "to_bytes", lambda self: made.append(1) or to_bytes(self))
    proxy = Proxy(p, user.owner_keys, quorum=2, release="add-remove", executor=pool)
    proxy.prepare(2, wait=True)
    assert len(made) == 1
    for oid in ("1", "2"):  # two batches, one share each, through the pool
        assert proxy.receive_shares([make_owner(p, oid, release="add-remove").share(np.full((3, 2), 0.2))]) == [oid]
    assert len(made) == 1 and proxy.received == ["1", "2"]


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_pooled_intake_chunks_cover_the_shares_and_end_the_workers_together(workers):
    # Small first chunks (one per worker), then equal chunks in a multiple of the workers: no worker is left
    # checking the tail of a last, larger chunk alone.
    from dpdpca.protocol.proxy import FIRST_CHUNK, MAX_CHUNK, intake_chunk_sizes

    for expected in range(1, 400):
        sizes = intake_chunk_sizes(expected, workers)
        assert sum(sizes) == expected and 1 <= min(sizes) and max(sizes) <= MAX_CHUNK
        first, rest = sizes[:workers], sizes[workers:]
        assert max(first) <= FIRST_CHUNK
        if rest:
            assert len(rest) % workers == 0 or len(rest) == sum(rest)  # fewer shares than workers: one each
            assert max(rest) - min(rest) <= 1
    assert intake_chunk_sizes(None, workers) == [FIRST_CHUNK] * workers  # then 16 a chunk


@pytest.mark.parametrize("expected", [None, 4])
def test_pool_intake_refuses_a_share_for_another_noise_setting_as_the_serial_one(make_user, make_owner, pool,
                                                                                 expected):
    """A share whose signed owners' noise label is not the session's (here: another epsilon) is refused by the
    pooled intake with the serial intake's error, taken out of its chunk's sum (expected=None: one chunk of
    four), and its owner's share with the session's noise is then accepted; the aggregates are the same."""
    from dpdpca.dp import calibrate_distributed
    from dpdpca.protocol.config import ReleaseOptions

    user = make_user(release="add-remove")
    p = user.params
    setting = ReleaseOptions(epsilon=1.0, delta=1e-5, release="add-remove", noise_by="owners")
    rng = np.random.default_rng(5)

    def share(oid, epsilon):
        cal = calibrate_distributed(epsilon=epsilon, delta=1e-5, d=3, frac_bits=p.frac_bits, owners=3, honest=3,
                                    quorum=2)
        return make_owner(p, oid, release="add-remove", noise=cal).share(0.5 * rng.uniform(-1, 1, size=(4, 3)))

    batch = [share("1", 1.0), share("2", 8.0), share("3", 1.0), share("2", 1.0)]
    serial = Proxy(p, user.owner_keys, quorum=2, release="add-remove")
    parallel = Proxy(p, user.owner_keys, quorum=2, release="add-remove", executor=pool)
    for proxy in (serial, parallel):
        proxy.expect_release(setting, owners=3)
    want = [Proxy._try(serial.receive_share, data) for data in batch]
    got = parallel.receive_shares(iter(batch), expected=expected)
    assert [_outcome(o) for o in got] == [_outcome(o) for o in want]
    assert [_outcome(o) for o in want] == [
        "1", ("ProtocolError", "share statement of owner '2' must say its share holds the session's noise "
                               "'owners:epsilon=1.0,delta=1e-05,owners=3,honest=3,quorum=2', got "
                               "'owners:epsilon=8.0,delta=1e-05,owners=3,honest=3,quorum=2'"), "3", "2"]
    assert parallel.received == serial.received == ["1", "3", "2"]
    serial.close_collection()
    parallel.close_collection()
    for name in share_sections("add-remove"):
        assert parallel._aggregate[name].ciphertexts == serial._aggregate[name].ciphertexts


def test_a_sections_own_checksum_is_not_hashed_again_inside_a_checked_message(make_user, make_owner, identity,
                                                                                pool, monkeypatch):
    """The message's digest covers every section, so a share's sections are hashed once: an owner who signs a
    section whose format trailer is wrong sends the same ciphertexts, taken as they are (serially and on the
    pool); the same bytes are refused wherever no digest covered them (alone, or in a message built here)."""
    from dpdpca.crypto import EncryptedArray, wire
    from dpdpca.errors import MessageError
    from dpdpca.protocol.sections import load_array

    user = make_user(release="add-remove")
    p = user.params
    honest = make_owner(p, "1", release="add-remove").share(np.full((3, 4), 0.2))
    msg = Message.from_bytes(honest)
    v = bytes(msg.sections["v"])
    blank = v[:-32] + bytes(32)  # a zero trailer: a checksum no corruption would make
    odd = _resigned(p, identity, "1", msg, dict(msg.sections, v=blank), "add-remove", None)
    calls = []
    real = wire.hashlib.sha256
    monkeypatch.setattr(wire, "hashlib", SimpleNamespace(sha256=lambda *a: calls.append(1) or real(*a)))
    proxies = [Proxy(p, user.owner_keys, quorum=1, release="add-remove") for _ in range(3)]
    assert proxies[0].receive_share(honest) == proxies[1].receive_share(odd) == "1"
    assert calls == []  # no section of a parsed share is hashed by its own format
    EncryptedArray.from_bytes(v, p.public_key)
    assert len(calls) == 1  # (the count sees the trailer's hash where it is made)
    assert Proxy(p, user.owner_keys, quorum=1, release="add-remove", executor=pool).receive_shares([odd]) == ["1"]
    for proxy in proxies[:2]:
        proxy.close_collection()
    for name in share_sections("add-remove"):
        assert proxies[1]._aggregate[name].ciphertexts == proxies[0]._aggregate[name].ciphertexts
    with pytest.raises(MessageError, match="SHA-256 trailer must match"):
        EncryptedArray.from_bytes(blank, p.public_key)
    built = Message(msg.type, msg.session, msg.key_fingerprint, msg.sender, msg.meta, dict(msg.sections, v=blank))
    honest_v = EncryptedArray.from_bytes(v, p.public_key)
    with pytest.raises(MessageError, match="section v: message SHA-256 trailer must match"):
        load_array(built, "v", p.public_key, chunks=list(honest_v.chunks), bound=honest_v.bound,
                   layout=honest_v.layout)
    assert load_array(Message.from_bytes(odd), "v", p.public_key, chunks=list(honest_v.chunks),
                      bound=honest_v.bound, layout=honest_v.layout).ciphertexts == honest_v.ciphertexts
    # a byte of the trailer changed in transit, not signed: the message's digest refuses it
    tampered = bytearray(honest)
    tampered[msg.offsets["v"] + len(v) - 1] ^= 1
    assert "digest" in str(Proxy._try(proxies[2].receive_share, bytes(tampered)))
