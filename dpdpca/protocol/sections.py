"""Checks of a message's ciphertext sections against the public layout, before anything is allocated from d.

Shared by the proxy (an owner's share, its own saved aggregate) and the data
user (the release): section sizes first (a small message that declares a huge
d costs nothing), then each section's layout, chunk sizes and bound.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dpdpca.crypto import EncryptedArray, PublicKey, scheme_of
from dpdpca.errors import KeyMismatchError, MessageError
from dpdpca.protocol.releases import as_release
from dpdpca.protocol.messages import Message
from dpdpca.protocol.params import ProtocolParams

__all__ = ["check_section_sizes", "load_array", "share_sections", "load_share_arrays", "check_share_units",
           "int_array", "min_share_bytes"]


def check_section_sizes(msg: Message, counts: dict[str, int], public_key: Any) -> None:
    """Refuse a message whose sections are too short for the ciphertexts its declared d implies.

    Runs before anything is allocated from d, so a small message that declares
    a huge d costs nothing.

    Raises
    ------
    MessageError
        A section shorter than ``count`` chunks' ciphertexts of the key's scheme need.
    """
    scheme = scheme_of(public_key)
    for name, count in counts.items():
        have = len(msg.section(name))
        count = scheme.ciphertext_count(public_key, count)
        need = count * scheme.min_ciphertext_bytes(public_key)
        if have < need:
            raise MessageError(f"section {name} must hold {count} ciphertexts ({need} bytes) for the declared d, "
                               f"got {have} bytes")


def load_array(msg: Message, name: str, public_key: PublicKey, *, chunks: list[int], bound: int,
                layout: Any, check_units: bool = True) -> EncryptedArray:
    """Deserialize a section and check it has the public layout, chunks and bound.

    ``check_units=False``: the caller tests the ciphertexts for units itself,
    with those of the other sections (:func:`load_share_arrays`).  A section
    of a message parsed from bytes (:meth:`Message.from_bytes`, which checked
    the message's digest over every section) is not hashed again for its own
    format's checksum (:func:`dpdpca.crypto.wire.decode_batch`'s trailer);
    one built in this process is.

    Raises
    ------
    MessageError
        A malformed section (named: ``section R: message ciphertext[3] must be
        a unit modulo n, ...``), or one off the public layout, chunks or bound.
    KeyMismatchError
        A section under another key.
    """
    try:
        arr = scheme_of(public_key).load(msg.section(name), public_key, layout=layout, check_units=check_units,
                                         check_trailer=not msg.sections_sha256)
    except KeyMismatchError:
        raise
    except MessageError as exc:
        raise MessageError(f"section {name}: {exc}") from None
    if arr.layout != layout:
        raise MessageError(f"section {name} layout must be {layout}, got {arr.layout}")
    if list(arr.chunks) != list(chunks):
        raise MessageError(f"section {name} must have {len(chunks)} ciphertexts in the public chunk layout, "
                           f"got {len(arr.chunks)}")
    if int(arr.bound) > bound:
        raise MessageError(f"section {name} bound must be <= the declared {bound}, got {arr.bound}")
    return arr


def share_sections(release: str) -> tuple[str, ...]:
    """The ciphertext sections of a share, in signed-digest order (the release's ``sections``)."""
    return as_release(release).sections


def min_share_bytes(params: ProtocolParams, d: int, release: str = "add-remove") -> int:
    """The fewest bytes one owner's share of ``d`` features takes: its ciphertexts alone, at their smallest wire
    size (:meth:`~dpdpca.crypto.CipherScheme.min_sections_bytes`; the header, the digest and any range proof come
    on top), so a size limit below it refuses every share of the session.
    """
    rel = as_release(release)
    return scheme_of(params.public_key).min_sections_bytes(params.public_key,
                                                           rel.share_chunks(d, params.layout.slots))


def load_share_arrays(msg: Message, params: ProtocolParams, d: int, *, owners: int,
                       release: str = "add-remove", check_units: bool = True) -> dict[str, EncryptedArray]:
    """The arrays of one share (``owners=1``) or of an aggregate, in :func:`share_chunks` shapes.

    Section sizes are checked against d before any list of length O(d^2) is built.  Every
    ciphertext of every section is tested for a unit modulo n in one batch (one gcd per share),
    unless ``check_units=False`` (the caller then tests a product of them).

    Raises
    ------
    MessageError
        A section too short for d, malformed, off the public layout, chunks or
        bound, or holding a ciphertext that is not a unit modulo n (named:
        ``section R: message ciphertext[3] must be a unit modulo n, ...``).
    """
    slots = params.layout.slots
    rel = as_release(release)
    bounds = {k: b * owners for k, b in params.share_bounds(rel).items()}
    scheme = scheme_of(params.public_key)
    if scheme.packs_sections:  # one packed stream for every section (BFV): its size is checked before parsing
        return scheme.load_sections({name: msg.section(name) for name in rel.sections}, params.public_key,
                                    layout=params.layout, bounds=bounds, encryptions=owners,
                                    lengths={name: sum(c) for name, c in rel.share_chunks(d, slots).items()})
    check_section_sizes(msg, rel.share_counts(d, slots), params.public_key)
    arrays = {name: load_array(msg, name, params.public_key, chunks=chunks,
                               bound=bounds[name], layout=params.layout, check_units=False)
              for name, chunks in rel.share_chunks(d, slots).items()}
    if check_units:
        check_share_units(arrays, params.public_key)
    return arrays


def check_share_units(arrays: dict[str, EncryptedArray], public_key: PublicKey) -> None:
    """Every ciphertext of every section a unit modulo n (one batched test), else MessageError naming it.

    Raises
    ------
    MessageError
        ``section R: message ciphertext[3] must be a unit modulo n, got a non-unit``.
    """
    scheme_of(public_key).check_units(arrays, public_key)


def int_array(values: Sequence[int]) -> np.ndarray:
    """A 1-D object array of Python ints (numpy keeps them exact)."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out
