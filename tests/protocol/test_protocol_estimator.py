"""The DPDPCA estimator, the common-driver entry point, transports and a 2048-bit run."""

from __future__ import annotations

import time

import numpy as np
import pytest

from dpdpca.errors import DataError, NotFittedError
from dpdpca.protocol import DPDPCA, FileTransport, run_protocol
from dpdpca.protocol.runner import owner_ids, progress_steps

SMALL = dict(key_bits=768, insecure_test_key=True)


def _data(seed: int, sizes=(40, 25, 35), d: int = 6) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    scales = np.linspace(2.0, 0.2, d)
    parts = []
    for n in sizes:
        X = rng.normal(size=(n, d)) * scales + 0.3
        parts.append(0.95 * X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0))
    return parts


def _top_subspace(parts, k):
    X = np.vstack(parts)
    Xc = X - X.mean(axis=0)
    return np.linalg.eigh(Xc.T @ Xc)[1][:, ::-1][:, :k]


def test_fit_returns_self_with_sklearn_attributes_and_copies_input():
    parts = _data(0)
    before = [p.copy() for p in parts]
    est = DPDPCA(n_components=3, epsilon=2.0, delta=1e-6, release="centred", **SMALL)
    assert est.fit(parts) is est
    assert all(np.array_equal(a, b) for a, b in zip(parts, before))
    assert est.components_.shape == (3, 6) and est.n_features_in_ == 6
    assert np.allclose(est.components_ @ est.components_.T, np.eye(3), atol=1e-10)
    assert np.array_equal(est.mean_, np.zeros(6))  # the protocol never reveals the mean
    assert np.all(np.diff(est.explained_variance_) <= 0)
    assert np.allclose(est.explained_variance_, est.result_.eigenvalues / 99)
    assert est.privacy_.epsilon == 2.0 and est.privacy_.mechanism == "discrete-gaussian"
    assert {"owner:1", "owner:2", "owner:3", "proxy"} == set(est.bytes_sent_)  # the data user sends nothing
    parties = est.timings_.to_dict()["parties"]
    assert {"quantize", "encrypt"} <= set(parties["owner:2"]) and "mask" in parties["proxy"]
    assert est.timings_.critical_path_s() < est.timings_.total_s()
    assert est.transform(parts[0]).shape == (40, 3)
    assert est.get_params()["n_components"] == 3


def test_high_epsilon_recovers_the_non_private_subspace():
    from dpdpca.metrics import captured_energy_ratio

    parts = _data(1, sizes=(300, 200, 250))
    est = DPDPCA(n_components=2, epsilon=100.0, **SMALL).fit(parts)
    U = _top_subspace(parts, 2)
    V = est.components_.T
    assert np.linalg.norm(U @ U.T - V @ V.T, 2) < 0.05
    assert captured_energy_ratio(V, np.vstack(parts), center=True) > 0.999


@pytest.mark.parametrize("release", ["add-remove", "centred"])
def test_sklearn_ratio_and_singular_values_from_the_released_trace_and_count(release):
    """explained_variance_ratio_ and singular_values_ come from released quantities (the noisy trace and count);
    at a huge epsilon they are scikit-learn's (centred PCA, denominator N - 1)."""
    parts = _data(2, sizes=(300, 200, 250))
    est = DPDPCA(n_components=3, epsilon=1e6, release=release, **SMALL).fit(parts)
    X = np.vstack(parts)
    Xc = X - X.mean(axis=0)
    s = np.linalg.svd(Xc, compute_uv=False)[:3]
    ratio = s ** 2 / (Xc ** 2).sum()
    assert np.all(np.isfinite(est.explained_variance_ratio_)) and np.all(np.isfinite(est.singular_values_))
    assert np.allclose(est.explained_variance_ratio_, ratio, rtol=1e-3)
    assert np.allclose(est.singular_values_, s, rtol=1e-3)


def test_transform_errors():
    with pytest.raises(NotFittedError, match="DPDPCA must be fitted before use"):
        DPDPCA(n_components=1).transform(np.zeros((2, 2)))
    est = DPDPCA(n_components=1, **SMALL).fit(_data(2, sizes=(5,), d=3))
    with pytest.raises(DataError, match="3 features"):
        est.transform(np.zeros((2, 4)))


def test_driver_runs_the_protocol_by_name():
    from dpdpca.driver import run

    result = run("dpdpca", _data(3), n_components=2, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(0), **SMALL)
    assert result.method == "dpdpca" and result.components.shape == (6, 2)
    assert result.privacy.neighbouring == "add/remove-one"  # the default release


def test_file_transport_carries_the_same_protocol(tmp_path, make_user):
    parts = _data(4, sizes=(6, 7))
    net = FileTransport(tmp_path / "mail")
    run = run_protocol(parts, n_components=1, user=make_user(), transport=net, verify=True, **SMALL)
    assert run.verify["max_abs_integer_error"] == 0
    assert list((tmp_path / "mail").glob("*/*.msg")) == []  # every message was consumed
    assert net.bytes_sent["owner:1"] > 0 and net.bytes_sent["proxy"] > 0 and "user" not in net.bytes_sent


@pytest.mark.parametrize("keep_read", [False, True])
def test_file_transport_hands_each_message_to_one_reader(tmp_path, keep_read):
    """Deleted or moved aside, a message read is gone from the box: a second reader never gets it too."""
    first = FileTransport(tmp_path, keep_read=keep_read, poll_s=0.001)
    second = FileTransport(tmp_path, keep_read=keep_read, poll_s=0.001)
    first.send("owner:1", "proxy", b"one")
    first.send("owner:2", "proxy", b"two")
    assert second.receive("proxy", timeout=0) == b"one"
    assert first.receive("proxy", timeout=0) == b"two"  # its listing still named "one": skipped, not re-read
    assert first.receive("proxy", timeout=0) is None and second.receive("proxy", timeout=0) is None
    assert list((tmp_path / "proxy").glob("*.msg")) == []
    kept = sorted(p.read_bytes() for p in (tmp_path / "proxy" / "read").glob("*.msg")) if keep_read else []
    assert kept == ([b"one", b"two"] if keep_read else [])
    assert (tmp_path / "proxy" / "read").exists() == keep_read


@pytest.mark.slow
def test_processes_dropout_and_verify():
    parts = _data(5, sizes=(8, 9, 10, 11))
    ticks: list[tuple[str, float]] = []
    run = run_protocol(parts, n_components=2, processes=True, verify=True, absent_owners=[1], quorum=3,
                       deadline_s=30.0, progress=lambda label: ticks.append((label, time.perf_counter())),
                       release="centred", **SMALL)  # the masking release: its mask phase is timed below
    assert run.verify["max_abs_integer_error"] == 0
    # Progress is real: each step ticks when its party reports it, so the proxy's masking and noise
    # lie between the "aggregate" and "mask and noise" ticks (they used to fire together at the end).
    at = dict(ticks)
    assert sorted(at) == sorted(["keygen", "owner 1", "owner 3", "owner 4", "aggregate", "mask and noise",
                                 "decrypt and eigh"]) and len(ticks) == progress_steps(3)
    proxy = run.result.timings.to_dict()["parties"]["proxy"]
    finishing = sum(proxy[phase] for phase in ("noise", "mask", "rerandomize"))
    assert at["mask and noise"] - at["aggregate"] >= 0.8 * finishing > 0
    assert sorted(run.owners_present) == ["1", "3", "4"] and run.result.extra["n_rows"] == 29
    assert set(run.result.bytes_sent) == {"owner:1", "owner:3", "owner:4", "proxy"}  # the user sends nothing


@pytest.mark.slow
def test_processes_quorum_below_the_owners_present():
    parts = _data(8, sizes=(5, 6, 7))
    run = run_protocol(parts, n_components=1, processes=True, quorum=2, verify=True, **SMALL)
    assert len(run.owners_present) == 2 and run.verify["max_abs_integer_error"] == 0
    by_id = dict(zip(owner_ids(len(parts)), parts))  # owners are named by id, never by position
    assert run.result.extra["n_rows"] == sum(by_id[o].shape[0] for o in run.owners_present)


@pytest.mark.slow
def test_processes_report_a_party_error_as_one_line():
    parts = _data(6, sizes=(4, 4))
    parts[1] = parts[1] * 10  # rows of norm > 1 with clipping off
    with pytest.raises(DataError, match="norm <= 1 with clipping off"):
        run_protocol(parts, n_components=1, processes=True, clip=False, **SMALL)


@pytest.mark.slow
def test_end_to_end_with_a_2048_bit_key():
    parts = _data(7, sizes=(300, 300), d=8)
    est = DPDPCA(n_components=2, epsilon=100.0, key_bits=2048).fit(parts)
    assert est.result_.params["key_bits"] == 2048
    assert est.result_.params["slots"] >= 10  # many slots per 2048-bit plaintext
    U = _top_subspace(parts, 2)
    assert np.linalg.norm(U @ U.T - est.components_.T @ est.components_, 2) < 0.05
