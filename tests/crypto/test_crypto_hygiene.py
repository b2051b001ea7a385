"""Hygiene: randomness sources, no pickle, only one module touches gmpy2, and misc option checks."""

from __future__ import annotations

import pathlib
import re

import pytest

import dpdpca.crypto
from dpdpca.crypto import PublicKey, SlotLayout, decrypt, encrypt
from dpdpca.errors import MessageError, ParameterError

SOURCES = sorted(pathlib.Path(dpdpca.crypto.__file__).parent.glob("*.py"))


def test_sources_found():
    assert {p.name for p in SOURCES} >= {"_gmp.py", "keys.py", "encrypted.py", "wire.py", "compute.py"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_pickle_no_numpy_randomness(path):
    text = path.read_text()
    assert not re.search(r"^\s*(import|from)\s+(c?pickle|marshal|shelve)\b", text, re.M)
    assert "np.random" not in text and "numpy.random" not in text
    assert not re.search(r"^\s*import random\b|^\s*from random import", text, re.M)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_only_backend_imports_gmpy2(path):
    imports_gmpy2 = re.search(r"^\s*(import gmpy2|from gmpy2\b)", path.read_text(), re.M) is not None
    assert imports_gmpy2 == (path.name == "_gmp.py")


def test_standard_method_and_bad_method(keys512):
    pk, sk = keys512
    layout = SlotLayout(slot_bits=40, slots=12)
    enc = encrypt(pk, [-3, 4], layout=layout, bound=4, method="standard")
    assert decrypt(sk, enc.rerandomize(method="standard")) == [-3, 4]
    with pytest.raises(ParameterError, match="method must be one of"):
        encrypt(pk, [1], layout=layout, bound=1, method="elgamal")


def test_bits_field_must_match(keys512):
    obj = keys512[0].to_json()
    obj["bits"] = 1024
    with pytest.raises(MessageError, match="public key bits must equal bit length of n 512, got 1024"):
        PublicKey.from_json(obj, insecure_test_key=True)
