"""The add/remove release in the protocol: exactness, N kept private, distributed noise against collusion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpdpca.dp import block_scales, calibrate_add_remove, calibrate_distributed
from dpdpca.errors import MessageError, OverflowRiskError, ParameterError
from dpdpca.protocol import add_remove
from dpdpca.protocol.messages import Message
from dpdpca.protocol import DataUser, ProtocolParams
from dpdpca.protocol.params import resolve_release
from dpdpca.protocol.rounds import reference_blocks_int
from dpdpca.protocol.runner import run_protocol
from dpdpca.protocol.transport import InProcessTransport

SMALL = dict(key_bits=768, insecure_test_key=True)


class RecordingTransport(InProcessTransport):
    """Keeps a copy of every message, to check what each party was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[tuple[str, str, bytes]] = []

    def send(self, sender: str, recipient: str, payload: bytes) -> None:
        self.messages.append((sender, recipient, bytes(payload)))
        super().send(sender, recipient, payload)


@pytest.mark.parametrize("noise_by", ["proxy", "owners"])
def test_decrypted_blocks_minus_noise_are_exact_and_n_never_travels_in_the_clear(unit_rows, noise_by):
    rng = np.random.default_rng(1)
    parts = [unit_rows(rng, 6 + i, 4) for i in range(3)]
    net = RecordingTransport()
    run = run_protocol(parts, n_components=2, verify=True, noise_by=noise_by, transport=net, **SMALL)
    assert run.verify == {"max_abs_integer_error": 0}
    assert run.result.privacy.neighbouring == "add/remove-one"
    n = sum(p.shape[0] for p in parts)
    for sender, _, data in net.messages:
        msg = Message.from_bytes(data)
        assert "N" not in msg.meta  # N is private under add/remove-one
        statements = [msg.meta["statement"]] if "statement" in msg.meta else msg.meta.get("statements", [])
        assert statements and all(st["n_rows"] is None for st in statements), sender
    # the user's noisy count is N plus noise, not N
    assert run.result.extra["n_rows_noisy"] != n
    assert abs(run.result.extra["n_rows_noisy"] - n) < 13 * 40  # sigma_N is about 33 at eps=1


def test_release_resolution_and_refusals(unit_rows):
    assert resolve_release(None) == "add-remove"
    assert resolve_release(None, sensitivity_mode="paper") == "centred"
    assert resolve_release(None, noise_lattice="integer") == "centred"
    assert resolve_release("add-remove", sensitivity_mode="paper") == "add-remove"
    parts = [unit_rows(np.random.default_rng(2), 4, 3)] * 3
    with pytest.raises(ParameterError, match=r"^noise_by must be 'proxy' with release 'centred'"):
        run_protocol(parts, n_components=1, release="centred", noise_by="owners", **SMALL)
    with pytest.raises(ParameterError, match=r"^honest_owners must be given only with noise_by 'owners', got 2$"):
        run_protocol(parts, n_components=1, honest_owners=2, **SMALL)
    with pytest.raises(ParameterError, match=r"^quorum must be > L - t = 2"):
        run_protocol(parts, n_components=1, noise_by="owners", honest_owners=1, quorum=2, **SMALL)


def test_epsilon_far_below_the_allowance_raises_for_add_remove(make_user, unit_rows):
    user = make_user(min_epsilon=0.5, min_delta=1e-6)
    with pytest.raises(OverflowRiskError, match="epsilon must be large enough .* got 1e-05"):
        run_protocol([unit_rows(np.random.default_rng(3), 4, 2)], n_components=1, epsilon=1e-5, delta=1e-6,
                     user=user, **SMALL)


def test_counted_statement_is_refused_in_the_add_remove_release(make_user, identity, unit_rows):
    from dpdpca.protocol import DataOwner, Proxy

    user = make_user()
    centred_share = DataOwner(user.params, identity("1"), insecure_test_key=True, release="centred").share(
        unit_rows(np.random.default_rng(4), 3, 2))
    with pytest.raises(MessageError, match=r"^share release must be 'add-remove', got 'centred'$"):
        Proxy(user.params, user.owner_keys, release="add-remove").receive_share(centred_share)


def test_centred_from_noisy_is_the_centred_scatter_without_noise(unit_rows):
    X = unit_rows(np.random.default_rng(5), 30, 4)
    ref = reference_blocks_int([X], frac_bits=16, clip=True)
    S, n = add_remove.centred_from_noisy(ref["R"], ref["v"], ref["N"][0], d=4, frac_bits=16)
    Xq = np.trunc(X * 2 ** 16) / 2 ** 16
    assert n == 30
    assert np.allclose(S, (Xq - Xq.mean(0)).T @ (Xq - Xq.mean(0)), atol=1e-9)


@pytest.mark.slow
def test_colluding_proxy_and_user_are_left_with_exactly_the_honest_owners_calibrated_noise(unit_rows):
    """Play proxy + user + 2 of 4 owners: strip the known parts; what is left must be the honest noise.

    The proxy adds no mask and no noise in this mode; the coalition decrypts
    the release, subtracts the data's exact statistics (the strongest
    adversary: it knows everything but the honest owners' noise) and the two
    colluding owners' own shares.  The residual, divided by the calibrated
    sigma of 2 honest shares, must be N(0, 1): KS at p > 1e-4 and a variance
    within 6.5% over 6435 values (a 5% sigma error moves it by 10%).
    """
    L, t, d = 4, 2, 64
    rng = np.random.default_rng(6)
    parts = [unit_rows(rng, 10, d) for _ in range(L)]
    cal = calibrate_distributed(epsilon=1.0, delta=1e-5, d=d, frac_bits=16, owners=L, honest=t)
    scales = block_scales(16)
    z_all: list[float] = []
    for _ in range(3):
        run = run_protocol(parts, n_components=2, verify=True, noise_by="owners", honest_owners=t, **SMALL)
        blocks, shares = run.extra["noisy_blocks"], run.extra["noise_blocks"]
        ref = reference_blocks_int(parts, frac_bits=16, clip=True)
        colluders = shares[t:]  # the coalition's own owners
        for b in ("R", "v", "N"):
            sigma = cal.sigma(b, t) * scales[b]  # integer units, t honest shares
            for i, value in enumerate(blocks[b]):
                residual = int(value) - int(ref[b][i]) - sum(int(c[b][i]) for c in colluders)
                z_all.append(residual / sigma)
        assert run.result.privacy.epsilon <= 1.0
        coalition = run.result.extra["coalitions"]
        assert coalition["proxy+user+2 owners"]["honest_noise_shares"] == t
    z = np.array(z_all)
    assert z.size == 3 * (d * (d + 1) // 2 + d + 1)
    assert stats.kstest(z, "norm").pvalue > 1e-4
    assert abs(np.var(z) - 1.0) < 0.065
    assert abs(np.mean(z)) < 4.0 / math.sqrt(z.size)


def test_proxy_noise_has_the_calibrated_sigma(unit_rows):
    """Proxy mode: decrypted - exact is the proxy's noise, at the reported per-block sigma (KS, p > 1e-4)."""
    d = 24
    parts = [unit_rows(np.random.default_rng(7), 12, d) for _ in range(2)]
    run = run_protocol(parts, n_components=2, verify=True, **SMALL)
    cal = calibrate_add_remove(epsilon=1.0, delta=1e-5, d=d, frac_bits=16)
    ref = reference_blocks_int(parts, frac_bits=16, clip=True)
    scales = block_scales(16)
    z = [(int(v) - int(ref[b][i])) / (cal.sigma(b) * scales[b])
         for b in ("R", "v", "N") for i, v in enumerate(run.extra["noisy_blocks"][b])]
    assert stats.kstest(z, "norm").pvalue > 1e-4
    assert run.result.privacy.sigma == pytest.approx(cal.sigma("R"))


def test_a_declared_release_narrows_the_layout_and_the_parties_refuse_the_other(make_user, identity, unit_rows):
    from dpdpca.protocol import DataOwner, Proxy
    from dpdpca.protocol.params import add_remove_value_bound

    both, ar = make_user(), make_user(release="add-remove")
    assert ar.params.layout.slots > both.params.layout.slots  # no N**2 term, no centred allowance
    assert ar.params.noise_allowance <= both.params.noise_allowance
    assert ar.params.layout.max_abs >= add_remove_value_bound(owners=10, rows_per_owner=64, frac_bits=16,
                                                              noise_bound=ar.params.noise_allowance)
    with pytest.raises(ParameterError, match=r"^release must be 'add-remove', the release the public parameters "
                                             r"were made for .* got 'centred'$"):
        DataOwner(ar.params, identity("1"), insecure_test_key=True, release="centred")
    with pytest.raises(ParameterError, match=r"^release must be 'add-remove'"):
        Proxy(ar.params, ar.owner_keys, release="centred")
    ce = make_user(release="centred")
    with pytest.raises(ParameterError, match=r"^release must be 'centred'"):
        Proxy(ce.params, ce.owner_keys, release="add-remove")
    # A result of the other release is refused by a user whose parameters declare one, before any decryption.
    user = make_user()
    proxy = Proxy(user.params, user.owner_keys, release="add-remove", quorum=2)
    for oid in ("1", "2"):
        owner = DataOwner(user.params, identity(oid), insecure_test_key=True, release="add-remove")
        proxy.receive_share(owner.share(unit_rows(np.random.default_rng(int(oid)), 8, 3)))
    proxy.close_collection()
    result = proxy.finish(epsilon=1.0, delta=1e-5)
    p = user.params
    declared = ProtocolParams.create(p.public_key, max_owners=10, max_rows_per_owner=64, session_id=p.session_id,
                                     release="centred")
    strict = DataUser(user.private_key, declared, owner_keys=user.owner_keys)
    with pytest.raises(MessageError, match=r"^result release must be 'centred', the one the public parameters "
                                           r"were made for, got 'add-remove'$"):
        strict.finish(result, n_components=1)
    assert not strict.ledger.is_released(p.session_id)
    assert user.finish(result, n_components=1).components.shape == (3, 1)  # "any" serves it
