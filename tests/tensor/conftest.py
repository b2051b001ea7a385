"""Single-threaded BLAS for the tensor tests (as in tests/baselines/conftest.py).

Third moments are many small matrix products; on a shared 2-core machine
threaded BLAS spins against other processes and runs 10-20x slower.
"""

from __future__ import annotations

import pytest

from dpdpca.bench._data import blas_threads_limited


@pytest.fixture(autouse=True)
def single_threaded_blas():
    """Limit BLAS to one thread for each test; restored afterwards."""
    with blas_threads_limited(1):
        yield
