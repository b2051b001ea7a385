"""Packed, batched Paillier encryption (Damgård–Jurik–Nielsen short exponents).

Layers, bottom up: :mod:`~dpdpca.crypto._gmp` (the only gmpy2 user),
:mod:`~dpdpca.crypto.keys` (keys, raw encryption and CRT decryption),
:mod:`~dpdpca.crypto.packing` (signed slots), :mod:`~dpdpca.crypto.codec`
(reals to integers), :mod:`~dpdpca.crypto.encrypted` and
:mod:`~dpdpca.crypto.matrix` (encrypted vectors and symmetric matrices with
bound tracking), :mod:`~dpdpca.crypto.wire` (binary format),
:mod:`~dpdpca.crypto.compute` (compute engines: serial, process pool, Dask), :mod:`~dpdpca.crypto.interop`
(python-paillier) and :mod:`~dpdpca.crypto.ciphertexts` (the public batch operations on raw ciphertexts that
the proxy's intake and the benchmarks use: product, divide-out, unit check, fixed-width bytes; nothing outside
this package imports the private backend), :mod:`~dpdpca.crypto.schemes` (Paillier and BFV behind one
interface) and :mod:`~dpdpca.crypto.lattice` (BFV over TenSEAL, optional).  Knows nothing of PCA or differential privacy.
"""

from dpdpca.crypto.codec import FixedPointCodec, MinMaxDiscretizer
from dpdpca.crypto.compute import local_process_pool, start_workers
from dpdpca.crypto.encrypted import (
    EncryptedArray,
    decrypt,
    decrypt_many,
    encrypt,
    encryptions_of_zero,
    scalar_times_packed,
    scalars_times_packed,
    sum_arrays,
)
from dpdpca.crypto.interop import from_phe, to_phe
from dpdpca.crypto.keys import (
    PrivateKey,
    PublicKey,
    generate_keypair,
    keypair_from_primes,
    load_private_key,
    load_public_key,
    save_private_key,
    save_public_key,
)
from dpdpca.crypto.matrix import (
    EncryptedSymmetricMatrix,
    triangle_size,
    upper_triangle_chunks,
    upper_triangle_flatten,
    upper_triangle_unflatten,
)
from dpdpca.crypto.packing import SlotLayout
from dpdpca.crypto.randomizers import RandomizerPool
from dpdpca.crypto.schemes import (SCHEMES, CipherScheme, private_key_from_json, public_key_from_json, scheme_named,
                                   scheme_of)

__all__ = [
    "RandomizerPool",
    "PublicKey",
    "PrivateKey",
    "generate_keypair",
    "keypair_from_primes",
    "save_public_key",
    "save_private_key",
    "load_public_key",
    "load_private_key",
    "SlotLayout",
    "FixedPointCodec",
    "MinMaxDiscretizer",
    "EncryptedArray",
    "encrypt",
    "encryptions_of_zero",
    "decrypt",
    "decrypt_many",
    "sum_arrays",
    "scalar_times_packed",
    "scalars_times_packed",
    "upper_triangle_chunks",
    "upper_triangle_flatten",
    "upper_triangle_unflatten",
    "triangle_size",
    "local_process_pool",
    "start_workers",
    "EncryptedSymmetricMatrix",
    "to_phe",
    "from_phe",
    "CipherScheme",
    "SCHEMES",
    "scheme_named",
    "scheme_of",
    "public_key_from_json",
    "private_key_from_json",
]
