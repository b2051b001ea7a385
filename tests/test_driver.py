"""The common driver: registry, dispatch, validation, compare."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpdpca import driver, pipelines
from dpdpca.estimator import PCAEstimator
from dpdpca.data import clip_rows, make_covariance_data, partition
from dpdpca.errors import DataError, ParameterError, ParameterTypeError, ProtocolError
from dpdpca.result import PCAResult

TENSOR = ["capeagn", "capeagn-conv", "capeagn-local", "capeagn-nonprivate"]
PLAINTEXT = ["dpdispca", "dpdispca-full", "capepca", "conv", "local", "pooled", "private-local-pca", "nonprivate",
             "fpca", "mod-sulq", "sketch", "frequent-directions"]


@pytest.fixture(scope="module")
def parts():
    X = make_covariance_data(600, 10, decay=2.0, rng=np.random.default_rng(11))
    X = clip_rows(X / np.linalg.norm(X, axis=1).max())[0]
    return partition(X, 3)


def test_registry_names():
    protocol = {"dpdpca", "dpdpca-centred", "dpdpca-paper", "dpdpca-distributed"}
    assert set(PLAINTEXT) | protocol | set(TENSOR) == set(driver.METHODS) == set(pipelines.PIPELINES)
    assert driver.METHODS["dpdpca"].estimator == "dpdpca.protocol.estimator:DPDPCA"
    assert driver.METHODS["dpdpca"].crypto and not driver.METHODS["pooled"].crypto
    assert set(PLAINTEXT) <= set(driver.available_methods())


@pytest.mark.parametrize("method", PLAINTEXT)
def test_every_plaintext_method_runs_through_the_driver(parts, method):
    res = driver.run(method, parts, n_components=3, epsilon=2.0, delta=1e-5, rng=np.random.default_rng(0))
    assert isinstance(res, PCAResult) and res.method == method
    assert res.components.shape == (10, 3) and res.eigenvalues.shape == (3,)
    np.testing.assert_allclose(res.components.T @ res.components, np.eye(3), atol=1e-10)
    assert np.all(np.diff(res.eigenvalues) <= 0)
    assert res.timings.total_s() > 0 and res.bytes_sent
    json.dumps(res.to_dict(), allow_nan=True)


def test_unknown_and_unavailable_methods(parts, monkeypatch):
    with pytest.raises(ParameterError, match="method must be one of .* got 'pca'"):
        driver.run("pca", parts, n_components=2, epsilon=1.0, delta=1e-5)
    monkeypatch.setitem(driver.METHODS, "later", pipelines.PipelineSpec("later", "dpdpca.no_such_module:Fn", ""))
    with pytest.raises(ParameterError, match="method 'later' is not available: dpdpca.no_such_module:Fn"):
        driver.run("later", parts, n_components=2, epsilon=1.0, delta=1e-5)
    assert "later" not in driver.available_methods()


def test_pipeline_must_return_a_result(parts, monkeypatch):
    import sys
    import types

    class Fake(PCAEstimator):
        def __init__(self, n_components=None, epsilon=1.0, delta=1e-5):
            self.n_components, self.epsilon, self.delta = n_components, epsilon, delta

        def _fit_result(self, partitions):
            return "not a result"

    mod = types.ModuleType("dpdpca_fake_pipeline")
    mod.Fake = Fake
    monkeypatch.setitem(sys.modules, "dpdpca_fake_pipeline", mod)
    monkeypatch.setitem(driver.METHODS, "fake", pipelines.PipelineSpec("fake", "dpdpca_fake_pipeline:Fake", ""))
    with pytest.raises(ProtocolError, match="must produce a PCAResult, got str"):
        driver.run("fake", parts, n_components=2, epsilon=1.0, delta=1e-5)


@pytest.mark.parametrize("method", ["dpdispca", "capepca", "private-local-pca", "nonprivate"])
def test_validation_errors(parts, method):
    kw = dict(n_components=2, epsilon=1.0, delta=1e-5)
    with pytest.raises(ParameterError, match="n_components must be <= 10, got 11"):
        driver.run(method, parts, **{**kw, "n_components": 11})
    with pytest.raises(DataError, match=r"partitions\[1\] must have at least 1 row"):
        driver.run(method, [parts[0], np.empty((0, 10))], **kw)
    bad = parts[0].copy()
    bad[3, 4] = np.nan
    with pytest.raises(DataError, match="non-finite value in row 3"):
        driver.run(method, [bad, parts[1]], **kw)
    bad = parts[1].copy()
    bad[5, 0] = -np.inf
    with pytest.raises(DataError, match=r"partitions\[1\] must be finite \(no NaN or inf\), got a non-finite value in row 5"):
        driver.run(method, [parts[0], bad], **kw)
    with pytest.raises(DataError, match="non-empty list"):
        driver.run(method, [], **kw)


@pytest.mark.parametrize("method", ["dpdispca", "capepca", "conv", "pooled", "local", "private-local-pca"])
def test_budget_and_norm_errors(parts, method):
    with pytest.raises(ParameterError, match="epsilon must be > 0, got -1.0"):
        driver.run(method, parts, n_components=2, epsilon=-1.0, delta=1e-5)
    with pytest.raises(ParameterError, match="delta must be in \\(0, 1\\), got 1.5"):
        driver.run(method, parts, n_components=2, epsilon=1.0, delta=1.5)
    with pytest.raises(DataError, match="L2 norm <= 1"):
        driver.run(method, [p * 3 for p in parts], n_components=2, epsilon=1.0, delta=1e-5)
    huge = parts[0].copy()
    huge[2] = 1e200  # finite, but its square overflows: a norm error, not a NaN/inf one
    with pytest.raises(DataError, match=r"L2 norm <= 1 .*got inf in row 2"):
        driver.run(method, [huge, parts[1]], n_components=2, epsilon=1.0, delta=1e-5)
    with pytest.raises(ParameterTypeError, match="rng must be None or a numpy.random.Generator, got 'int'"):
        driver.run(method, parts, n_components=2, epsilon=1.0, delta=1e-5, rng=42)
    with pytest.raises(TypeError, match="epsilon must be a real number, got '1'"):
        driver.run(method, parts, n_components=2, epsilon="1", delta=1e-5)
    with pytest.raises(ParameterTypeError, match="n_components must be an integer, got 2.5"):
        driver.run(method, parts, n_components=2.5, epsilon=1.0, delta=1e-5)


def test_compare_summary(parts):
    out = driver.compare(["nonprivate", "capepca", "local"], parts, n_components=3, epsilon=1.0, delta=1e-5,
                         runs=3, rng=np.random.default_rng(5), center=True)
    m = out["methods"]
    assert m["nonprivate"]["captured_energy_ratio"] == pytest.approx(1.0, abs=1e-12)
    assert m["nonprivate"]["std"] == pytest.approx(0.0, abs=1e-12)
    assert m["nonprivate"]["privacy"]["epsilon"] == "inf"
    for name in ("capepca", "local"):
        assert 0 < m[name]["captured_energy_ratio"] <= 1.0 + 1e-12
        assert len(m[name]["ratios"]) == 3 and m[name]["std"] >= 0
        assert m[name]["privacy"]["epsilon"] == pytest.approx(1.0)
        assert m[name]["time_s"] > 0
    json.dumps(out, allow_nan=False)
    with pytest.raises(ParameterError, match="runs must be >= 1, got 0"):
        driver.compare(["nonprivate"], parts, n_components=2, epsilon=1.0, delta=1e-5, runs=0)
    with pytest.raises(ParameterError, match="method must be one of"):
        driver.compare(["nonprivate", "bogus"], parts, n_components=2, epsilon=1.0, delta=1e-5)


def test_compare_refuses_to_mix_neighbouring_relations(parts):
    """FPCA has only a replace-one form, the other pipelines default to add/remove-one: the same (epsilon, delta)
    under the two relations are different guarantees, so a comparison mixing them is refused; one relation
    passed to every method runs."""
    with pytest.raises(ParameterError, match=r"one neighbouring relation \(capepca: add/remove-one\), got "
                                             r"replace-one from fpca"):
        driver.compare(["nonprivate", "capepca", "fpca"], parts, n_components=2, epsilon=1.0, delta=1e-5)
    one = {m: {"neighbouring": "replace-one"} for m in ("capepca", "fpca")}
    out = driver.compare(["nonprivate", "capepca", "fpca"], parts, n_components=2, epsilon=1.0, delta=1e-5,
                         method_options=one)
    assert {out["methods"][m]["privacy"]["neighbouring"] for m in ("capepca", "fpca")} == {"replace-one"}


@pytest.mark.parametrize("method", ["capepca", "pooled", "sketch"])
def test_a_seeded_rng_is_named_in_the_privacy_report(parts, method):
    """A Generator as rng makes the DP noise reproducible: the report says so (it read as an OS-entropy run's);
    without one the report has no such note."""
    seeded = driver.run(method, parts, n_components=2, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(3))
    fresh = driver.run(method, parts, n_components=2, epsilon=1.0, delta=1e-5)
    assert "seeded numpy Generator" in seeded.privacy.notes and "not a production release" in seeded.privacy.notes
    assert "seeded" not in fresh.privacy.notes
    assert (seeded.privacy.epsilon, seeded.privacy.delta) == (fresh.privacy.epsilon, fresh.privacy.delta)


def test_seeded_runs_are_reproducible(parts):
    a = driver.run("capepca", parts, n_components=2, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(9))
    b = driver.run("capepca", parts, n_components=2, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(9))
    np.testing.assert_array_equal(a.components, b.components)
