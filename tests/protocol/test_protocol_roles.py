"""The option groups and the roles' steps: one description of each party, driven over any transport."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dpdpca.errors import ParameterError, ProtocolError
from dpdpca.protocol import (DeclaredBounds, Deployment, InProcessTransport, KeyOptions, ProtocolOptions,
                             ReleaseOptions, run_protocol)
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
from dpdpca.protocol.owner import DataOwner
from dpdpca.protocol.proxy import Proxy
from dpdpca.protocol.roles import ProxySteps, owner_round, progress_labels, proxy_round, user_round
from dpdpca.protocol.transport import PathTransport
from dpdpca.protocol.user import DataUser

SMALL = dict(key_bits=768, insecure_test_key=True)


def _parts(seed: int, sizes=(9, 8, 7), d: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [0.9 * X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
            for X in (rng.normal(size=(n, d)) for n in sizes)]


def test_the_flat_names_land_in_their_groups_and_a_misspelt_one_is_refused():
    opts = ProtocolOptions.from_flat(epsilon=2.0, key_bits=1024, clip=False, quorum=2, processes=True,
                                     sensitivity_mode="paper")
    assert opts.release == ReleaseOptions(epsilon=2.0, sensitivity_mode="paper", release="centred")
    assert opts.release.mode == "centred"  # the paper's sensitivity asks for the paper's release
    assert opts.key == KeyOptions(key_bits=1024) and opts.bounds == DeclaredBounds(clip=False)
    assert opts.deployment.launcher == "processes" and opts.deployment.quorum == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.release.epsilon = 3.0  # type: ignore[misc]
    with pytest.raises(TypeError, match="epsilonn"):
        ProtocolOptions.from_flat(epsilonn=1.0)
    with pytest.raises(ParameterError, match="epsilon must be"):
        ReleaseOptions(epsilon=-1.0)
    with pytest.raises(ParameterError, match="launcher must be"):
        Deployment(launcher="cluster")
    with pytest.raises(ParameterError, match="options must be given alone"):
        run_protocol(_parts(0), n_components=1, options=opts, epsilon=1.0)


def test_grouped_options_and_flat_keywords_run_the_same_protocol():
    parts = _parts(1)
    grouped = ProtocolOptions(release=ReleaseOptions(epsilon=3.0, release="add-remove", noise_by="owners"),
                              key=KeyOptions(**SMALL), deployment=Deployment(quorum=2))
    run = run_protocol(parts, n_components=1, options=grouped)  # owners' noise without verify
    assert len(run.owners_present) == 2 and run.verify is None
    assert run.result.privacy.noise_added_by == run_protocol(
        parts, n_components=1, epsilon=3.0, release="add-remove", noise_by="owners", quorum=2,
        **SMALL).result.privacy.noise_added_by


def test_the_role_steps_over_named_files_tick_each_step_once(tmp_path):
    """The per-role commands' deployment, by hand: every party's steps over PathTransport."""
    parts = _parts(2)
    user = DataUser.generate(max_owners=3, max_rows_per_owner=16, **SMALL)
    ids = {oid: OwnerIdentity.generate(oid) for oid in ("a", "b", "c")}
    user.owner_keys = OwnerKeyring.from_identities(ids.values())
    ticks: list[str] = []
    for (oid, ident), X in zip(ids.items(), parts):
        owner = DataOwner(user.params, ident, insecure_test_key=True, release="add-remove")
        owner_round(owner, X, PathTransport(outbox=[tmp_path / f"{oid}.msg"]), tick=ticks.append)
    proxy = Proxy(user.params, user.owner_keys, release="add-remove", record_noise_for_testing=True)
    steps = ProxySteps(proxy, ReleaseOptions(epsilon=1.0, release="add-remove"))
    net = PathTransport(inbox=[tmp_path / f"{o}.msg" for o in ids], outbox=[tmp_path / "result.msg"])
    assert proxy_round(steps, net, deadline_s=None, tick=ticks.append) == 0
    res = user_round(user, PathTransport(inbox=[tmp_path / "result.msg"]), n_components=2, tick=ticks.append)
    assert ticks == progress_labels(list(ids))[1:]  # keygen is the launcher's
    assert res.components.shape == (3, 2) and sorted(res.extra["owners"]) == ["a", "b", "c"]
    assert set(net.bytes_sent) == {"proxy"} and net.bytes_sent["proxy"] == (tmp_path / "result.msg").stat().st_size


def test_proxy_steps_refuse_options_for_another_release():
    user = DataUser.generate(max_owners=2, max_rows_per_owner=4, release="any", **SMALL)
    keyring = OwnerKeyring.from_identities([OwnerIdentity.generate("a")])
    proxy = Proxy(user.params, keyring, release="centred")
    with pytest.raises(ProtocolError, match="'centred' release"):
        ProxySteps(proxy, ReleaseOptions(release="add-remove"))
    with pytest.raises(ProtocolError, match="release options"):
        ProxySteps(proxy).release()
    with pytest.raises(ProtocolError, match="got none"):
        user_round(user, InProcessTransport(), n_components=1)
