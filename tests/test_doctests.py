"""The Examples in the docstrings of every module of the package run (``doctest``)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dpdpca

MODULES = sorted(m.name for m in pkgutil.walk_packages(dpdpca.__path__, "dpdpca."))


def test_every_module_is_collected():
    assert {"dpdpca.linalg", "dpdpca.pipelines", "dpdpca.crypto.keys", "dpdpca.protocol.estimator",
            "dpdpca.dp.mechanisms", "dpdpca.baselines.capepca"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
