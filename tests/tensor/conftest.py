"""Single-threaded BLAS for the tensor tests (as in tests/baselines/conftest.py).

Third moments are many small matrix products; on a shared 2-core machine
threaded BLAS spins against other processes and runs 10-20x slower.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def single_threaded_blas():
    """Limit BLAS to one thread for each test; restored afterwards."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
