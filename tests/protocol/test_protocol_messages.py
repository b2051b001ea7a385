"""Message format: round trip, truncation, tampering, version, key and session checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpdpca.errors import KeyMismatchError, MessageError, ProtocolError
from dpdpca.protocol.messages import Message, MessageType, check_owner_id, frame


def _msg() -> Message:
    return Message(MessageType.OWNER_SHARE, "ab" * 16, "f" * 64, "owner:7",
                   meta={"owner_id": "7", "d": 3, "declared_bounds": {"R": "10"}},
                   sections={"R": b"\x01\x02\x03", "v": b"", "N": b"xyz" * 50})


def test_round_trip_keeps_every_field():
    m = _msg()
    back = Message.from_bytes(m.to_bytes())
    assert back == m and back.round == 1


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_flipped_byte_is_rejected(data):
    raw = bytearray(_msg().to_bytes())
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(MessageError):
        Message.from_bytes(bytes(raw))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_any_truncation_is_rejected(data):
    raw = _msg().to_bytes()
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(MessageError):
        Message.from_bytes(raw[:cut])


def test_wrong_version_is_rejected_even_with_a_valid_digest():

    raw = bytearray(_msg().to_bytes()[:-32])
    raw[6] = 99
    raw = frame(bytes(raw))
    with pytest.raises(MessageError, match="version must be 3, got 99"):
        Message.from_bytes(raw)


def test_expect_checks_key_type_and_session():
    m = Message.from_bytes(_msg().to_bytes())
    m.expect(MessageType.OWNER_SHARE, session="ab" * 16, key_fingerprint="f" * 64)
    with pytest.raises(KeyMismatchError, match="key_fingerprint"):
        m.expect(MessageType.OWNER_SHARE, session="ab" * 16, key_fingerprint="e" * 64)
    with pytest.raises(ProtocolError, match="type must be MASKED_RESULT"):
        m.expect(MessageType.MASKED_RESULT, session="ab" * 16, key_fingerprint="f" * 64)
    with pytest.raises(ProtocolError, match="replayed from another session"):
        m.expect(MessageType.OWNER_SHARE, session="cd" * 16, key_fingerprint="f" * 64)


def test_missing_section_and_bad_meta_are_message_errors():
    m = _msg()
    with pytest.raises(MessageError, match="section 'vwin'"):
        m.section("vwin")
    with pytest.raises(MessageError, match="meta 'N'"):
        m.meta_int("N")


@pytest.mark.parametrize("bad", ["", "-x", "a" * 65, "a b", 3, None, "ü", "alice\n", "alice\r"])
def test_owner_ids_are_validated(bad):
    with pytest.raises(ProtocolError, match="owner_id"):
        check_owner_id(bad)


def test_the_frame_digest_hashes_the_sections_once_as_their_sections_digest():
    """Version 3: the digest covers the header and S, the sections' digest, which is what an owner signs over its
    ciphertexts; a reader gets S from its one pass over the sections, and a section changed, moved or renamed
    changes S (so the digest no longer matches)."""
    from dpdpca.protocol.counts import ciphertext_digest
    from dpdpca.protocol.messages import sections_digest

    m = _msg()
    raw = m.to_bytes()
    back = Message.from_bytes(raw)
    assert back.sections_sha256 == sections_digest(m.sections).hex() == ciphertext_digest(m.sections, ["R", "v", "N"])
    assert Message.from_bytes(raw, views=True).sections_sha256 == back.sections_sha256
    assert sections_digest({"R": b"\x01\x02", "v": b"\x03"}) != sections_digest({"R": b"\x01", "v": b"\x02\x03"})
    assert sections_digest({"R": b"x", "v": b""}) != sections_digest({"v": b"x", "R": b""})
    body = raw[:-32]
    moved = body[:-1] + bytes([body[-1] ^ 1])
    with pytest.raises(MessageError, match="digest must match"):
        Message.from_bytes(moved + raw[-32:])
    assert Message.from_bytes(frame(moved)).sections["N"][-1] == body[-1] ^ 1
