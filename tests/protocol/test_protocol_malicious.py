"""Issue 24, the protocol side: attacks by parties that deviate from the protocol, each performed here.

Every test is named in docs/threat-model.md next to the claim it backs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpdpca.errors import MessageError
from dpdpca.protocol import Proxy, ProtocolParams
from dpdpca.protocol.intake import IntakeContext, check_share
from dpdpca.protocol.messages import Message, MessageType


def _rewrap(data: bytes, **meta) -> bytes:
    """The message's bytes with some meta fields replaced, digest recomputed (anyone can)."""
    m = Message.from_bytes(data)
    return Message(m.type, m.session, m.key_fingerprint, m.sender, {**m.meta, **meta}, m.sections).to_bytes()


def _rewrap_header(data: bytes, **fields) -> bytes:
    """The message's bytes with header fields replaced verbatim (round, sections...), digest recomputed."""
    import hashlib
    import struct

    body = data[:-32]
    hlen = struct.unpack_from(">I", body, 8)[0]
    header = json.loads(body[12:12 + hlen])
    header.update(fields)
    hb = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    out = body[:8] + struct.pack(">I", len(hb)) + hb + body[12 + hlen:]
    return out + hashlib.sha256(out).digest()


# -- item 8: message fields parsed strictly ---------------------------------------------------------

LOOSE_INTEGERS = [4.5, 4.0, "4", True, None, [4]]


@pytest.fixture(scope="module")
def centred_session(make_user, make_owner):
    """A centred session of two owners (d = 3): the user, a share, the proxy's state and its result."""
    user = make_user(max_rows_per_owner=8)
    p = user.params
    shares = [make_owner(p, oid, release="centred").share(np.full((4, 3), 0.3) * (k + 1) / 2)
              for k, oid in enumerate(("1", "2"))]
    proxy = Proxy(p, user.owner_keys, quorum=2, release="centred")
    for s in shares:
        proxy.receive_share(s)
    proxy.close_collection()
    state = proxy.state_bytes()
    result = proxy.finish(epsilon=1.0, delta=1e-5)
    return user, shares[0], state, result


@pytest.mark.parametrize("bad", LOOSE_INTEGERS)
def test_a_loose_d_is_refused_in_every_message_kind(centred_session, bad):
    """``d = 4.5``, ``d = "4"``, ``d = true``... in a share, the proxy's state and the result: one-line refusals."""
    user, share, state, result = centred_session
    p = user.params
    with pytest.raises(MessageError, match=r"meta d must be an integer|must have integer meta 'd'"):
        check_share(_rewrap(share, d=bad), IntakeContext(p, user.owner_keys, "centred", 4096))
    with pytest.raises(MessageError, match=r"meta d must be an integer|must have integer meta 'd'"):
        Proxy.from_state(p, user.owner_keys, _rewrap(state, d=bad))
    with pytest.raises(MessageError, match=r"meta d must be an integer|must have integer meta 'd'"):
        user.reconstruct(_rewrap(result, d=bad))
    assert user.ledger.releases() == {}  # refused before anything was decrypted


@pytest.mark.parametrize("field, bad, match", [
    ("N", 7, "meta N must be a decimal string"), ("N", "+7", "meta N must be a decimal string"),
    ("N", " 7", "meta N must be a decimal string"), ("N", "\u0667", "meta N must be a decimal string"),
    ("N", "7.0", "meta N must be a decimal string"), ("frac_bits", 16.0, "meta frac_bits must be an integer"),
    ("frac_bits", "16", "meta frac_bits must be an integer"), ("frac_bits", True, "meta frac_bits must be an integer"),
])
def test_loose_result_fields_are_refused(centred_session, field, bad, match):
    user, _, _, result = centred_session
    with pytest.raises(MessageError, match=match):
        user.reconstruct(_rewrap(result, **{field: bad}))
    assert user.ledger.releases() == {}


@pytest.mark.parametrize("fields, match", [
    ({"round": 1.0}, "message round must be an integer"), ({"round": "1"}, "message round must be an integer"),
    ({"round": True}, "message round must be an integer"), ({"meta": [["d", 3]]}, "message meta must be a JSON object"),
    ({"sender": 7}, "message sender must be a string"), ({"sections": {"R": 1}}, "message sections must be a list"),
])
def test_loose_header_fields_are_refused(centred_session, fields, match):
    _, share, _, _ = centred_session
    with pytest.raises(MessageError, match=match):
        Message.from_bytes(_rewrap_header(share, **fields))


def test_loose_section_lengths_and_statement_counts_are_refused(centred_session):
    user, share, _, _ = centred_session
    m = Message.from_bytes(share)
    table = [[name, float(len(body))] for name, body in m.sections.items()]
    with pytest.raises(MessageError, match="section length must be an integer"):
        Message.from_bytes(_rewrap_header(share, sections=table))
    statement = dict(m.meta["statement"])
    for bad in ("\u0664", " 4", 4, "4.0"):  # an Arabic-Indic 4 passes str.isdigit but is no count
        with pytest.raises(MessageError, match="n_rows must be a decimal string"):
            check_share(_rewrap(share, statement=dict(statement, n_rows=bad)),
                        IntakeContext(user.params, user.owner_keys, "centred", 4096))


@pytest.mark.parametrize("field, bad", [("max_owners", 10.0), ("max_rows_per_owner", "8"), ("frac_bits", True),
                                        ("slots", 3.5), ("version", "3"), ("min_epsilon", "0.01"),
                                        ("min_delta", False), ("noise_allowance", 12), ("release", 1),
                                        ("insecure_test_key", "yes")])
def test_loose_public_json_fields_are_refused(make_user, field, bad):
    obj = make_user(max_rows_per_owner=8).params.to_json()
    obj["dpdpca_protocol"] = dict(obj["dpdpca_protocol"], **{field: bad})
    with pytest.raises(MessageError, match=f"dpdpca_protocol.{field} must be"):
        ProtocolParams.from_json(obj)
