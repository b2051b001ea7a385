"""Each party's steps of one protocol session, written once and driven over a :class:`Transport`.

* an owner: :func:`owner_round` -- share, send to the proxy;
* the proxy: :class:`ProxySteps` (accept a share, close the collection,
  release) and :func:`proxy_round`, which drives them over a transport:
  collect until the quorum or the deadline, close, refuse late shares, send
  the release to the data user;
* the data user: :func:`user_round` -- receive the release, decrypt once, PCA.

Every deployment reuses these: the in-process and multi-process launchers
(:mod:`dpdpca.protocol.runner`, :mod:`dpdpca.protocol.processes`), the
per-role commands over files (``dpdpca owner share``, ``proxy aggregate`` and
``finish``, ``user finish``) and the HTTPS service (the proxy's collection,
:mod:`dpdpca.net.collection`, calls the same :class:`ProxySteps`; owners and
the user use :class:`dpdpca.net.client.ServiceTransport`).

``tick`` is called with a label when a step has really happened
(:func:`progress_labels`), in whichever process the party runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, Callable

from dpdpca.dp.accountant import PrivacyLedger
from dpdpca.errors import DpdpcaError, ProofError, ProtocolError
from dpdpca.protocol.config import ReleaseOptions
from dpdpca.protocol.owner import DataOwner
from dpdpca.protocol.proxy import Proxy
from dpdpca.protocol.transport import Transport
from dpdpca.protocol.user import DataUser
from dpdpca.result import PCAResult

__all__ = ["PROXY", "USER", "Tick", "owner_round", "ProxySteps", "proxy_round", "collect_shares",
           "reject_late_shares", "user_round", "progress_labels"]

PROXY = "proxy"
USER = "user"

Tick = Callable[[str], None]


def _no_tick(label: str) -> None:
    pass


def progress_labels(owner_ids: list[str]) -> list[str]:
    """The labels one run ticks, in the order they happen (owners in any order)."""
    return ["keygen", *(f"owner {o}" for o in owner_ids), "aggregate", "mask and noise", "decrypt and eigh"]


# -- an owner ---------------------------------------------------------------------------

def owner_round(owner: DataOwner, X: Any, net: Transport, *, tick: Tick = _no_tick) -> bytes:
    """Round 1 of one owner: encrypt and sign its share, send it to the proxy; return the bytes sent."""
    data = owner.share(X)
    net.send(owner.party, PROXY, data)
    tick(f"owner {owner.owner_id}")
    return data


# -- the proxy ---------------------------------------------------------------------------

class ProxySteps:
    """The proxy's three steps, with its release options bound.

    Parameters
    ----------
    proxy : Proxy
    release : ReleaseOptions or None
        Must describe the same release as ``proxy.release``; needed by
        :meth:`release`.  Given, the proxy also refuses on arrival a share
        whose signed noise label is not the session's
        (:meth:`Proxy.expect_release`); a proxy that only collects has none
        and leaves the labels to the release.
    owners : int or None
        L, the owners of the session (add/remove release with owners' noise);
        default the listed owners.  The same L at intake and at the release.
    ledger : PrivacyLedger or None
        A budget ledger: :meth:`release` prices the release against it first
        and records it (:meth:`dpdpca.protocol.proxy.Proxy.finish`).
    label : str
        The ledger entry's label.

    Raises
    ------
    ProtocolError
        ``release`` is for another release than the proxy's.
    """

    def __init__(self, proxy: Proxy, release: ReleaseOptions | None = None, *, owners: int | None = None,
                 ledger: PrivacyLedger | None = None, label: str = "") -> None:
        if release is not None and release.release != proxy.release:
            raise ProtocolError(f"proxy release options must be for the {str(proxy.release)!r} release, "
                                f"got {release.mode!r}")
        self.proxy = proxy
        self.options = release
        self.owners = owners
        self.ledger = ledger
        self.label = label
        if release is not None:  # lets the proxy draw the release's noise, and check the labels, while collecting
            proxy.expect_release(release, owners=owners)

    @property
    def received(self) -> list[str]:
        return self.proxy.received

    @property
    def quorum(self) -> int:
        return self.proxy.quorum

    def accept(self, data: bytes) -> str:
        """Check and keep one owner's signed share; its owner id (:meth:`Proxy.receive_share`)."""
        return self.proxy.receive_share(data)

    def accept_many(self, datas: Iterable[bytes], *, expected: int | None = None) -> list[str | DpdpcaError]:
        """Check and keep a batch of shares; per share its owner id or its error (:meth:`Proxy.receive_shares`)."""
        return self.proxy.receive_shares(datas, expected=expected)

    def close(self) -> int | None:
        """Aggregate the accepted shares; N (centred release) or None (:meth:`Proxy.close_collection`)."""
        return self.proxy.close_collection()

    def release(self) -> bytes:
        """Mask (centred), add the DP noise under encryption, rerandomize: the one release of the session."""
        if self.options is None:
            raise ProtocolError("proxy release needs its release options, got none")
        return self.proxy.finish(self.options, owners=self.owners, ledger=self.ledger, label=self.label)


def collect_shares(steps: ProxySteps, net: Transport, *, deadline_s: float | None, until_quorum: bool = True) -> None:
    """Accept shares from ``net`` until the quorum is reached or the deadline passes.

    Shares that arrive later are not read here; once the collection is
    closed they are refused as late, so N and S-bar cover exactly the owners
    accepted.  ``until_quorum=False``: every share the transport holds (the
    proxy command given its share files).

    Shares go to the proxy in batches: after the first of a batch arrives,
    every share already waiting joins it (up to the quorum), so a proxy with a
    local process pool checks them in parallel while it reads
    (:meth:`ProxySteps.accept_many`).  The first share refused raises, as one
    share at a time would (after the rest of its batch was handled), except
    a failed range proof: its owner is excluded and the collection goes on.
    """
    stop = None if deadline_s is None else time.monotonic() + deadline_s
    while not until_quorum or len(steps.received) < steps.quorum:
        left = None if stop is None else max(0.0, stop - time.monotonic())
        first = net.receive(PROXY, timeout=left)
        if first is None:
            return
        want = steps.quorum - len(steps.received) if until_quorum else None
        for outcome in steps.accept_many(_waiting(net, first, want), expected=want):
            if isinstance(outcome, ProofError):
                continue  # refused, logged and excluded by the proxy (Proxy.excluded_): the session goes on
            if isinstance(outcome, DpdpcaError):
                raise outcome


def _waiting(net: Transport, first: bytes, most: int | None) -> Iterator[bytes]:
    """``first``, then every message already waiting for the proxy, ``most`` in all (None: no limit)."""
    yield first
    taken = 1
    while most is None or taken < most:
        data = net.receive(PROXY, timeout=0.0)
        if data is None:
            return
        yield data
        taken += 1


def reject_late_shares(steps: ProxySteps, net: Transport) -> int:
    """Shares already queued for the proxy after it closed collection: each is refused as late; how many."""
    late = 0
    while (data := net.receive(PROXY, timeout=0.0)) is not None:
        try:
            steps.accept(data)
        except ProtocolError:
            late += 1
    return late


def proxy_round(steps: ProxySteps, net: Transport, *, deadline_s: float | None, tick: Tick = _no_tick,
                late: Callable[[ProxySteps, Transport], int] = reject_late_shares) -> int:
    """The proxy's session: collect, close, refuse late shares, release to the data user.

    ``late`` handles the shares still coming after the close (default:
    refuse those already queued; the multi-process launcher keeps draining its
    pipes instead).  Returns what ``late`` returned.
    """
    collect_shares(steps, net, deadline_s=deadline_s)
    steps.close()
    n_late = late(steps, net)
    tick("aggregate")
    net.send(PROXY, USER, steps.release())
    tick("mask and noise")
    return n_late


# -- the data user -----------------------------------------------------------------------

def user_round(user: DataUser, net: Transport, *, n_components: int, timeout: float | None = None,
               tick: Tick = _no_tick) -> PCAResult:
    """The data user's last round: receive the proxy's release, decrypt it once, PCA."""
    data = net.receive(USER, timeout=timeout)
    if data is None:
        raise ProtocolError("user must receive the proxy's release, got none")
    result = user.finish(data, n_components=n_components)
    tick("decrypt and eigh")
    return result
