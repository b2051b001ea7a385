"""Message format: round trip, truncation, tampering, version, key and session checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpdpca.errors import KeyMismatchError, MessageError, ProtocolError
from dpdpca.protocol.messages import Message, MessageType, check_owner_id


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
    import hashlib

    raw = bytearray(_msg().to_bytes()[:-32])
    raw[6] = 99
    raw = bytes(raw) + hashlib.sha256(bytes(raw)).digest()
    with pytest.raises(MessageError, match="version must be 2, got 99"):
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
