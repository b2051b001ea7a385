"""The three parties of Wang & Chang's protocol, one module each; this module re-exports them.

* :class:`DataOwner` -- ``share(X)``: clip, quantize, exact share, encrypt
  (eq. 8), and sign the statement binding its row count ``N_l`` to the
  ciphertexts (:mod:`dpdpca.protocol.counts`).
* :class:`Proxy` -- ``receive_share`` (verifies the owner's signature),
  ``close_collection`` (Alg. 1 lines 2-4; N is the sum of the signed counts),
  ``finish`` (lines 6-11: mask, G, DP noise under encryption, rerandomize;
  once per session, :mod:`dpdpca.protocol.ledger`).  Never holds the secret key.
* :class:`DataUser` -- key generation, ``finish``: checks the signed counts,
  exact ``(R'' - v'v'^T) / N`` (eq. 22) and the eigendecomposition; decrypts
  one release per session.

:class:`DataOwner` is :mod:`dpdpca.protocol.owner`, :class:`Proxy`
:mod:`dpdpca.protocol.proxy`, :class:`DataUser` :mod:`dpdpca.protocol.user`.
The chunk layout of a share is :mod:`dpdpca.protocol.layout`; the mask b
(bound, total-variation cost, draw) :mod:`dpdpca.protocol.masking`; the checks
of a message's sections :mod:`dpdpca.protocol.sections`; the wording of the
centred release's privacy report :mod:`dpdpca.protocol.notes`.  Each party's
steps over a transport are :mod:`dpdpca.protocol.roles`.

Alg. 1 line 5 (the proxy learning N) needs no round of its own: N is public
under replace-one, so owners send their counts in the clear, signed, and the
data user never decrypts anything for the proxy (version 1 of the protocol
had a count round, which was a decryption oracle).

Each party holds only what its role may hold and talks only in
:class:`~dpdpca.protocol.messages.Message` bytes.  The exact integer form
(``docs/architecture.md``, "The protocol in integers") with the rigorous
(``"n-scaled"``) noise lattice by default:

``R'' = N*R + v b^T + b v^T + b b^T + G''`` and ``v' = v + b``, so the user
computes ``M = R'' - v' v'^T = N*R - v v^T + G'' = N*S_int + G''`` in Python
integers and ``S_bar + G' = M / (N * 2**(2f))`` as the last (correctly rounded)
step.
"""

from __future__ import annotations

from dpdpca.protocol.layout import row_chunk_spans, triangle_chunk_count, window_chunks
from dpdpca.protocol.masking import draw_mask, mask_bound, mask_tv_bound
from dpdpca.protocol.owner import DataOwner
from dpdpca.protocol.proxy import Proxy
from dpdpca.protocol.user import DataUser

__all__ = ["DataOwner", "Proxy", "DataUser", "row_chunk_spans", "window_chunks", "draw_mask", "mask_bound",
           "mask_tv_bound", "triangle_chunk_count"]
