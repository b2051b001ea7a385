"""The proxy's online path: what it made while collection was open is reused only for the setting it was made for."""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca.crypto import local_process_pool
from dpdpca.protocol.proxy import POOL_MIN_MULMODS, Proxy
from dpdpca.protocol.sections import share_sections


@pytest.mark.parametrize("eps_ahead, eps_release", [(1.0, 1.0), (0.5, 1.0)])
def test_the_calibration_made_ahead_is_the_one_priced_only_for_its_setting(make_user, make_owner, unit_rows,
                                                                          eps_ahead, eps_release):
    user = make_user(release="add-remove")
    rng = np.random.default_rng(4)
    shares = [make_owner(user.params, o, release="add-remove").share(unit_rows(rng, 5, 4)) for o in ("1", "2")]
    proxy = Proxy(user.params, user.owner_keys, quorum=2, release="add-remove")
    proxy.prepare(4, epsilon=eps_ahead, delta=1e-5)
    ahead = proxy._ready_calibration
    assert ahead is not None
    for s in shares:
        proxy.receive_share(s)
    proxy.close_collection()
    setting = proxy.setting(epsilon=eps_release, delta=1e-5)
    priced = proxy.price(setting)
    fresh = proxy.release.calibrate(setting, d=4, frac_bits=user.params.frac_bits, kappa=user.params.kappa)
    assert (priced is ahead[1]) == (eps_ahead == eps_release)  # reused only when made for this setting
    assert priced.report.to_dict() == fresh.report.to_dict()  # and then it is the calibration made now
    assert priced.calibration.sigma_squared_int == fresh.calibration.sigma_squared_int
    out = proxy.finish(setting)
    assert proxy.privacy_.to_dict()["epsilon"] == pytest.approx(eps_release) and out


def test_a_small_aggregation_runs_in_process_and_equals_the_pools(make_user, make_owner, unit_rows):
    user = make_user(release="add-remove")
    rng = np.random.default_rng(6)
    shares = [make_owner(user.params, o, release="add-remove").share(unit_rows(rng, 3, 3)) for o in ("1", "2", "3")]
    serial = Proxy(user.params, user.owner_keys, quorum=3, release="add-remove")
    for s in shares:
        serial.receive_share(s)
    serial.close_collection()
    with local_process_pool(2) as pool:
        pooled = Proxy(user.params, user.owner_keys, quorum=3, release="add-remove", executor=pool)
        assert all(isinstance(o, str) for o in pooled.receive_shares(shares, expected=3))
        mulmods = (len(pooled._partials) - 1) * sum(len(a.chunks) for a in pooled._partials[0].values())
        assert mulmods < POOL_MIN_MULMODS
        pooled.close_collection()
    # the CPU of taking the shares in is counted on both paths (the pool's: its workers' kernels too)
    assert serial.intake_cpu_s_ > 0 and pooled.intake_cpu_s_ > 0
    for name in share_sections("add-remove"):
        assert pooled._aggregate[name].ciphertexts == serial._aggregate[name].ciphertexts
        assert pooled._aggregate[name].bound == serial._aggregate[name].bound
