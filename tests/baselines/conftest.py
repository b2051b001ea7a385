"""Shared synthetic data for the baseline tests (fixed seeds, D = 40, K = 8, S = 10)."""

from __future__ import annotations

import numpy as np
import pytest

from dpdpca.bench._data import blas_threads_limited
from dpdpca.data import make_covariance_data, partition, preprocess

D, K, S = 40, 8, 10


def synthetic_sites(n_per_site: int, seed: int = 0, n_sites: int = S, d: int = D):
    """Centred, max-norm-scaled data with a decaying spectrum, split into equal sites."""
    X = preprocess(make_covariance_data(n_per_site * n_sites, d, decay=8.0, rng=np.random.default_rng(seed)))
    return X, partition(X, n_sites)


@pytest.fixture(autouse=True)
def single_threaded_blas():
    """Run BLAS single-threaded in these tests.

    They decompose many small matrices; on a shared 2-core machine, threaded
    BLAS on 40 x 40 problems spins against the other processes and runs 10x
    slower.  Restored after each test, so other test directories are untouched.
    """
    with blas_threads_limited(1):
        yield


@pytest.fixture(scope="session")
def make_sites():
    """The :func:`synthetic_sites` factory, as a fixture (test modules do not import conftest)."""
    return synthetic_sites


@pytest.fixture(scope="session")
def sites500():
    return synthetic_sites(500)
