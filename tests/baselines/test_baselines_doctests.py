"""The Examples in the docstrings of data, metrics, driver and baselines run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "dpdpca.data.loaders", "dpdpca.data.preprocessing", "dpdpca.data.synthetic", "dpdpca.metrics",
    "dpdpca.driver", "dpdpca.baselines.dpdispca", "dpdpca.baselines.capepca",
    "dpdpca.baselines.private_local_pca", "dpdpca.baselines.nonprivate",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
