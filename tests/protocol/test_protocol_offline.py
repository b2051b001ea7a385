"""Offline work: randomness made ahead is exact, distributed as fresh randomness, used once, kept private."""

from __future__ import annotations

import os
import stat
import threading

import gmpy2
import numpy as np
import phe
import pytest
from scipy import stats

from dpdpca.crypto import EncryptedArray, RandomizerPool, SlotLayout
from dpdpca.errors import FileAccessError, MessageError, ProtocolError
from dpdpca.protocol import ProtocolParams
from dpdpca.protocol.messages import Message
from dpdpca.protocol.offline import OwnerRandomness
from dpdpca.protocol.proxy import Proxy
from dpdpca.protocol.runner import run_protocol


def _plaintexts(share: bytes, params, sk) -> dict[str, list[int]]:
    m = Message.from_bytes(share)
    return {name: [int(x) for x in sk.raw_decrypt(EncryptedArray.from_bytes(body, params.public_key).ciphertexts)]
            for name, body in m.sections.items()}


@pytest.mark.parametrize("release", ["centred", "add-remove"])
def test_owner_share_from_precomputed_factors_is_exact_and_uses_them_once(make_user, make_owner, unit_rows,
                                                                          release):
    user = make_user()
    X = unit_rows(np.random.default_rng(3), 6, 5)
    fresh = make_owner(user.params, "1", release=release).share(X)
    owner = make_owner(user.params, "1", release=release)
    made = owner.precompute(5)
    assert "precompute" in owner.timings_.to_dict()["parties"]["owner:1"]
    factors = [int(f) for v in made.sections.values() for f in v]
    ahead = owner.share(X)
    # The same plaintexts as a share encrypted with fresh randomness; the ciphertexts are
    # exactly (1 + m n) f for the factors made ahead, in order.
    assert _plaintexts(ahead, user.params, user.private_key) == _plaintexts(fresh, user.params, user.private_key)
    pk = user.params.public_key
    msg = Message.from_bytes(ahead)
    cts = [int(c) for body in msg.sections.values() for c in EncryptedArray.from_bytes(body, pk).ciphertexts]
    plain = [int(m) for m in user.private_key.raw_decrypt(cts)]
    assert cts == [(1 + m * int(pk.n)) * f % int(pk.nsquare) for m, f in zip(plain, factors)]
    assert made.sections == {}  # handed out, then forgotten
    again = owner.share(X)  # a second share gets fresh factors, never the same ones
    cts2 = {int(c) for body in Message.from_bytes(again).sections.values()
            for c in EncryptedArray.from_bytes(body, pk).ciphertexts}
    assert cts2.isdisjoint(cts)


def test_owner_refuses_randomness_made_for_another_d_or_key(make_user, make_owner, other_keypair, unit_rows):
    user = make_user()
    owner = make_owner(user.params, "1")
    owner.precompute(4)
    with pytest.raises(ProtocolError, match="randomness made ahead must be for d=5"):
        owner.share(unit_rows(np.random.default_rng(1), 4, 5))
    other = ProtocolParams.create(other_keypair[0], max_owners=10, max_rows_per_owner=64)
    foreign = OwnerRandomness.make(other.public_key.with_own_base(), key_fingerprint=other.key_fingerprint,
                                   release="centred", d=4, slots=other.layout.slots)
    with pytest.raises(ProtocolError, match="randomness must be made for key"):
        owner.use_randomness(foreign)


@pytest.mark.parametrize("release", ["add-remove", "centred"])
def test_randomness_file_is_private_read_once_and_deleted(tmp_path, make_user, make_owner, unit_rows, other_keypair,
                                                          release):
    user = make_user(release=release)
    pk = user.params.public_key
    owner = make_owner(user.params, "1", release=release)
    made = owner.precompute(3)
    digits = str(int(made.sections["R"][0]))
    assert digits[:12] not in repr(made) and "factors=" in repr(made)
    path = made.save(tmp_path / "owner" / "randomness.bin", pk)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with pytest.raises(FileAccessError):  # never overwritten (a second prepare would reuse nothing)
        made.save(path, pk)
    loaded = OwnerRandomness.consume(path, pk)
    assert not path.exists()  # deleted before use
    # every section gets its own factors back, in order (the sections are not in alphabetical order)
    assert loaded.sections == {k: [int(f) for f in v] for k, v in made.sections.items()}
    assert list(loaded.sections) == list(made.sections)
    with pytest.raises(FileAccessError, match="must be readable"):
        OwnerRandomness.consume(path, pk)  # used once
    owner.use_randomness(loaded)
    share = owner.share(unit_rows(np.random.default_rng(2), 4, 3))
    assert _plaintexts(share, user.params, user.private_key)
    # Readable by others: refused and left in place; another key: refused, and left in place too.
    again = owner.precompute(3)
    loose = again.save(tmp_path / "loose.bin", pk)
    os.chmod(loose, 0o644)
    with pytest.raises(FileAccessError, match="mode 0600, got mode 644"):
        OwnerRandomness.consume(loose, pk)
    assert loose.exists()
    os.chmod(loose, 0o600)
    with pytest.raises(MessageError, match="randomness file key must be"):
        OwnerRandomness.consume(loose, other_keypair[0])
    assert loose.exists()


def test_a_file_that_is_not_this_shares_randomness_is_refused_and_never_deleted(tmp_path, make_user, make_owner):
    """Everything that proves a randomness file of this key, release, d and layout is checked before the file is
    deleted: a mistyped path naming another 0600 file (a private key, an identity), a damaged file, or factors
    made for another share are refused and left byte for byte as they were."""
    user = make_user()
    pk, slots = user.params.public_key, user.params.layout.slots
    made = make_owner(user.params, "1").precompute(3)
    good = made.save(tmp_path / "good.bin", pk).read_bytes()
    magic, rest = good.split(b"\n", 1)
    header, blob = rest.split(b"\n", 1)
    victims = {
        "key.json": (b'{"private": "secret"}\n', MessageError, "must start with 'DPDPCA-OWNER-RANDOMNESS-1'"),
        "empty.bin": (b"", MessageError, "must start with"),
        "header.bin": (magic + b"\n{not json\n" + blob, MessageError, "must have a valid header"),
        "no-line.bin": (magic + b"\n" + header, MessageError, "must have a valid header"),
        "short.bin": (good[:-1], MessageError, "must hold"),
        "long.bin": (good + b"\0", MessageError, "must hold"),
    }
    for name, (data, error, match) in victims.items():
        path = tmp_path / name
        path.write_bytes(data)
        os.chmod(path, 0o600)
        with pytest.raises(error, match=match):
            OwnerRandomness.consume(path, pk, release=made.release, d=3, slots=slots)
        assert path.read_bytes() == data, name
    # a randomness file of this key, made for another d, release or layout: refused and kept for its own share
    for wrong in ({"d": 4}, {"release": "centred"}, {"slots": slots + 1}):
        want = {"release": made.release, "d": 3, "slots": slots, **wrong}
        with pytest.raises(ProtocolError, match=f"must be made for {next(iter(wrong))}=.*the file is kept"):
            OwnerRandomness.consume(tmp_path / "good.bin", pk, **want)
        assert (tmp_path / "good.bin").read_bytes() == good
    loaded = OwnerRandomness.consume(tmp_path / "good.bin", pk, release=made.release, d=3, slots=slots)
    assert loaded.sections == {k: [int(f) for f in v] for k, v in made.sections.items()}
    assert not (tmp_path / "good.bin").exists()


def _jacobi(c: int, n: int) -> int:
    return int(gmpy2.jacobi(int(c) % n, n))


@pytest.mark.parametrize("ahead", [False, True])
def test_factors_made_ahead_have_the_jacobi_behaviour_of_fresh_ones(keypair, ahead):
    # The check the code makes on fresh factors (test_protocol_threats), on factors made ahead:
    # DJN factors keep the Jacobi symbol of a phe ciphertext's r0 (-1), r^n factors make it uniform.
    pk, _ = keypair
    n = int(pk.n)
    r0 = next(r for r in range(2, 1000) if gmpy2.jacobi(r, n) == -1)
    layout = SlotLayout(slot_bits=64, slots=1)
    arr = EncryptedArray(pk, layout, [1] * 400, 5, [phe.PaillierPublicKey(n).raw_encrypt(3, r_value=r0)] * 400)
    own = pk.with_own_base()
    if ahead:
        with RandomizerPool(own, method="djn") as djn, RandomizerPool(pk) as full:
            djn.fill(400, wait=True)
            full.fill(400, wait=True)
            assert djn.ready == full.ready == 400
            djn_out = arr.rerandomize(factors=djn.take(400))
            full_out = arr.rerandomize(factors=full.take(400))
    else:
        djn_out = arr.rerandomize(method="djn", base=own)
        full_out = arr.rerandomize(method="standard")
    assert {_jacobi(c, n) for c in djn_out.ciphertexts} == {-1}
    signs = [_jacobi(c, n) for c in full_out.ciphertexts]
    assert stats.binomtest(signs.count(1), len(signs), 0.5).pvalue > 1e-4
    # an owner's precomputed factors are DJN factors of its own base (Jacobi symbol +1 on a Blum n)
    made = OwnerRandomness.make(own, key_fingerprint=pk.fingerprint, release="centred", d=3, slots=4)
    assert {_jacobi(f, n) for v in made.sections.values() for f in v} == {1}


def test_proxy_noise_drawn_ahead_is_used_once_and_only_for_its_setting(make_user, make_owner, unit_rows):
    user = make_user(release="add-remove")
    rng = np.random.default_rng(5)
    shares = [make_owner(user.params, o, release="add-remove").share(unit_rows(rng, 5, 4)) for o in ("1", "2")]

    def run(eps_prepare: float, eps_finish: float) -> Proxy:
        proxy = Proxy(user.params, user.owner_keys, quorum=2, release="add-remove", record_noise_for_testing=True)
        proxy.prepare(4, epsilon=eps_prepare, delta=1e-5)
        drawn = proxy._ready_noise
        assert drawn is not None
        for s in shares:
            proxy.receive_share(s)
        proxy.close_collection()
        proxy.finish_add_remove(epsilon=eps_finish, delta=1e-5)
        assert proxy._ready_noise is None  # used or dropped, never kept
        proxy.drawn_for_test = drawn[1]
        return proxy

    same = run(1.0, 1.0)
    assert same.noise_blocks_for_testing_ is same.drawn_for_test  # the noise drawn while collection was open
    other = run(0.5, 1.0)  # drawn for another epsilon: a fresh draw for the one released
    assert other.noise_blocks_for_testing_ is not other.drawn_for_test
    assert other.privacy_.to_dict()["epsilon"] == pytest.approx(1.0)


def test_proxy_with_an_executor_draws_its_noise_beside_the_rerandomizers_and_uses_it_once(make_user, make_owner,
                                                                                         unit_rows):
    # The DJN factors go to the executor, so the sampler runs in a thread meanwhile (no idle core first).
    from concurrent.futures import ThreadPoolExecutor

    user = make_user(release="add-remove")
    rng = np.random.default_rng(6)
    shares = [make_owner(user.params, o, release="add-remove").share(unit_rows(rng, 5, 4)) for o in ("1", "2")]
    with ThreadPoolExecutor(2) as ex:
        proxy = Proxy(user.params, user.owner_keys, quorum=2, release="add-remove", record_noise_for_testing=True,
                      executor=ex)
        proxy.prepare(4, epsilon=1.0, delta=1e-5)
        thread = proxy._noise_thread
        assert thread is not None  # drawn in the background, not before the factors
        thread.join()
        drawn = proxy._ready_noise
        assert drawn is not None
        for s in shares:
            proxy.receive_share(s)
        proxy.close_collection()
        proxy.finish_add_remove(epsilon=1.0, delta=1e-5)
    assert proxy._ready_noise is None and proxy._noise_thread is None
    assert proxy.noise_blocks_for_testing_ is drawn[1]
    assert proxy.timings_.to_dict()["parties"]["proxy"]["precompute_noise"] > 0


def test_run_with_an_executor_makes_the_owners_factors_ahead_and_stays_exact(unit_rows):
    # The runner's owners' offline work runs in a thread ahead of their turns when there is an executor.
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(9)
    parts = [unit_rows(rng, 5, 4) for _ in range(3)]
    with ThreadPoolExecutor(2) as ex:
        run = run_protocol(parts, n_components=2, epsilon=1.0, delta=1e-5, key_bits=768, insecure_test_key=True,
                           verify=True, executor=ex)
    assert run.verify["max_abs_integer_error"] == 0
    offline = run.result.timings.to_dict()["offline_s"]
    assert all(offline[f"owner:{k}"] > 0 for k in (1, 2, 3))


def test_a_proxy_rebuilt_from_its_state_rerandomizes_add_remove_with_djn_under_its_own_base(make_user, make_owner,
                                                                                          unit_rows):
    # proxy finish in another process than proxy aggregate: nothing was made ahead, and the factors
    # made then are DJN factors under a base the proxy draws (not r^n, not the published hs).
    user = make_user(release="add-remove")
    rng = np.random.default_rng(8)
    proxy = Proxy(user.params, user.owner_keys, quorum=2, release="add-remove")
    for o in ("1", "2"):
        proxy.receive_share(make_owner(user.params, o, release="add-remove").share(unit_rows(rng, 5, 4)))
    proxy.close_collection()
    again = Proxy.from_state(user.params, user.owner_keys, proxy.state_bytes())
    pool = again._randomizers
    assert pool.method == "djn" and pool.ready == 0 and int(pool.public_key.hs) != int(user.params.public_key.hs)
    out = Message.from_bytes(again.finish_add_remove(epsilon=1.0, delta=1e-5))
    assert set(out.sections) == {"R2", "v2", "N2"}


def test_run_with_an_executor_stops_making_factors_when_an_owner_fails(unit_rows):
    # An owner's turn that fails ends the run with its error; the thread making the owners' factors ahead
    # is shut down and the run returns (no hang on factors nobody will use).
    from concurrent.futures import ThreadPoolExecutor

    from dpdpca.protocol.transport import InProcessTransport

    class Broken(InProcessTransport):
        def send(self, sender: str, recipient: str, payload: bytes) -> None:
            if sender == "owner:2":
                raise ConnectionError("owner 2's link is down")
            super().send(sender, recipient, payload)

    rng = np.random.default_rng(10)
    parts = [unit_rows(rng, 5, 4) for _ in range(4)]
    with ThreadPoolExecutor(2) as ex:
        with pytest.raises(ConnectionError, match="owner 2's link is down"):
            run_protocol(parts, n_components=2, epsilon=1.0, delta=1e-5, key_bits=768, insecure_test_key=True,
                         executor=ex, transport=Broken())
    # joined, not left running
    assert not [t for t in threading.enumerate() if t.name.startswith("dpdpca-owner-precompute")]


@pytest.mark.parametrize("release", ["centred", "add-remove"])
def test_owner_online_turn_leaves_the_pool_alone(make_user, make_owner, unit_rows, release):
    # With its factors made ahead, a Paillier owner's share is made in its own thread: nothing goes to its
    # executor (bench timing times that turn by the owner thread's CPU time, so it must hold all of it).
    from concurrent.futures import ThreadPoolExecutor

    class Counting(ThreadPoolExecutor):
        submitted = 0

        def submit(self, *args, **kwargs):  # type: ignore[override]
            Counting.submitted += 1
            return super().submit(*args, **kwargs)

    user = make_user()
    X = unit_rows(np.random.default_rng(4), 6, 5)
    with Counting(2) as ex:
        owner = make_owner(user.params, "1", release=release, executor=ex)
        owner.precompute(5)
        made = Counting.submitted
        assert made > 0  # the factors were made on the pool
        share = owner.share(X)
        assert Counting.submitted == made
    fresh = make_owner(user.params, "1", release=release).share(X)
    assert _plaintexts(share, user.params, user.private_key) == _plaintexts(fresh, user.params, user.private_key)
