"""Privacy accounting across releases: an RDP/zCDP accountant and a ledger file.

A data user who runs sweeps or repeated releases on the same data needs the
total cost.  Each release is a :class:`ReleaseCost`: its own (epsilon, delta)
and its Renyi-DP curve ``alpha -> eps(alpha)`` on the fixed order grid
:data:`ORDERS` (plus an additive ``delta_extra`` for terms outside the RDP
curve, e.g. the Wang-Chang mask's total-variation term).  A
:class:`PrivacyLedger` is a JSON file per dataset that records releases and
reports the composed guarantee at the budget's delta, taking the better of
two valid compositions:

* **RDP** (Mironov 2017): RDP curves add over releases; the sum converts to
  ``(epsilon, delta)`` by Canonne, Kamath & Steinke (2020), Prop. 12:
  ``eps = min_alpha r(alpha) + log(1 - 1/alpha) - (log delta + log alpha)/(alpha - 1)``
  (the conversion Google's dp-accounting uses), then ``delta_extra`` terms add.
* **basic** (Dwork & Roth 2014, Thm 3.16): epsilons and deltas add.  With one
  release it is that release's own (epsilon, delta), which RDP cannot beat.

Releases whose RDP curve is unknown (the plaintext baselines) enter the RDP
route by basic composition: the curves of the others are converted at
``delta - sum(their deltas)``, then their epsilons are added.

Composition needs one neighbouring relation.  A ledger takes the relation of
its first entry.  An add/remove-one release entering a replace-one ledger is
converted by group privacy (a replace is a remove and an add): zCDP/RDP of
order alpha at ``rho`` becomes ``4 rho`` (Bun & Steinke 2016, Prop. 1.9; only
zCDP curves are converted, other curves become infinite and leave basic
composition) and ``(eps, delta)`` becomes ``(2 eps, (1 + e^eps) delta)``.
A replace-one release cannot enter an add/remove-one ledger (it says nothing
about adding a record) and is refused.

The ledger refuses (:class:`BudgetExceededError`) a release that would push the
composed guarantee past the declared total budget, *before* the release runs:
costs are computed from the public request, never from the data.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpdpca._io import atomic_write_json, exclusive_lock
from dpdpca._validation import check_delta, check_positive, param_error
from dpdpca.dp.report import ADD_REMOVE_ONE, NEIGHBOURING_RELATIONS, REPLACE_ONE
from dpdpca.errors import BudgetExceededError, DpdpcaError, MessageError, ParameterError

__all__ = [
    "LEDGER_VERSION",
    "ORDERS",
    "BudgetExceededError",
    "PrivacyLedger",
    "ReleaseCost",
    "rdp_to_delta",
    "rdp_to_epsilon",
]

#: The Renyi orders of every curve: dp-accounting's default grid (1.1 ... 10.9 by 0.1, 11 ... 63, 128 ... 1024).
ORDERS: tuple[float, ...] = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024])
LEDGER_VERSION = 1


def rdp_to_epsilon(orders: Sequence[float], rdp: Sequence[float], delta: float) -> tuple[float, float]:
    """Smallest epsilon over the orders at ``delta`` (CKS 2020 Prop. 12); also the best order.

    ``eps(alpha) = r + log1p(-1/alpha) - (log delta + log alpha)/(alpha - 1)``,
    for ``alpha > 1``; an infinite ``r`` gives infinity.
    """
    delta = check_delta("delta", delta)
    best, best_order = math.inf, float("nan")
    for a, r in zip(orders, rdp):
        if not a > 1 or not math.isfinite(r):
            continue
        eps = max(0.0, r + math.log1p(-1.0 / a) - (math.log(delta) + math.log(a)) / (a - 1.0))
        if eps < best:
            best, best_order = eps, float(a)
    return best, best_order


def rdp_to_delta(orders: Sequence[float], rdp: Sequence[float], epsilon: float) -> float:
    """Smallest delta over the orders at ``epsilon`` (the inverse form of :func:`rdp_to_epsilon`)."""
    epsilon = check_positive("epsilon", epsilon)
    best = 1.0
    for a, r in zip(orders, rdp):
        if not a > 1 or not math.isfinite(r):
            continue
        log_d = (a - 1.0) * (r - epsilon + math.log1p(-1.0 / a)) - math.log(a)
        best = min(best, math.exp(min(log_d, 0.0)))
    return best


@dataclass(frozen=True)
class ReleaseCost:
    """What one release costs, as a value.

    Parameters
    ----------
    epsilon, delta : float
        The release's own guarantee.
    rdp : tuple of float
        Renyi-DP ``eps(alpha)`` at each order of :data:`ORDERS` (``inf`` where
        unknown).
    neighbouring : str
    delta_extra : float
        Additive delta outside the RDP curve (added after conversion).
    mechanism, label : str
    rho : float or None
        Set when the curve is ``alpha * rho`` (zCDP), so that group privacy can
        convert it exactly.
    """

    epsilon: float
    delta: float
    rdp: tuple[float, ...]
    neighbouring: str
    delta_extra: float = 0.0
    mechanism: str = ""
    label: str = ""
    rho: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_zcdp(cls, rho: float, *, epsilon: float, delta: float, neighbouring: str, delta_extra: float = 0.0,
                  mechanism: str = "", label: str = "") -> ReleaseCost:
        """A rho-zCDP release (curve ``alpha * rho``) that also claims (epsilon, delta)."""
        rho = check_positive("rho", rho)
        return cls(epsilon=float(epsilon), delta=float(delta), rdp=tuple(a * rho for a in ORDERS),
                   neighbouring=_check_relation(neighbouring), delta_extra=float(delta_extra),
                   mechanism=mechanism, label=label, rho=rho)

    @classmethod
    def from_rdp(cls, curve: Callable[[float], float], *, epsilon: float, delta: float, neighbouring: str,
                 delta_extra: float = 0.0, mechanism: str = "", label: str = "") -> ReleaseCost:
        """A release with an RDP curve ``curve(alpha)`` evaluated on :data:`ORDERS`."""
        return cls(epsilon=float(epsilon), delta=float(delta), rdp=tuple(float(curve(a)) for a in ORDERS),
                   neighbouring=_check_relation(neighbouring), delta_extra=float(delta_extra),
                   mechanism=mechanism, label=label)

    def as_relation(self, neighbouring: str) -> ReleaseCost:
        """This cost under ``neighbouring`` (group privacy add/remove -> replace-one; module docstring)."""
        if neighbouring == self.neighbouring:
            return self
        if self.neighbouring == ADD_REMOVE_ONE and neighbouring == REPLACE_ONE:
            rdp = (tuple(4.0 * a * self.rho for a in ORDERS) if self.rho is not None
                   else tuple(math.inf for _ in ORDERS))
            return ReleaseCost(epsilon=2.0 * self.epsilon, delta=min(1.0, (1.0 + math.exp(self.epsilon)) * self.delta),
                               rdp=rdp, neighbouring=REPLACE_ONE, delta_extra=min(1.0, 2.0 * self.delta_extra),
                               mechanism=self.mechanism, label=self.label,
                               rho=None if self.rho is None else 4.0 * self.rho, meta=dict(self.meta))
        raise param_error("neighbouring", f"{self.neighbouring!r} (a replace-one release says nothing about "
                          f"adding a record, so it cannot enter an add/remove-one ledger)", neighbouring)

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "rdp": [_num(r) for r in self.rdp],
                "neighbouring": self.neighbouring, "delta_extra": self.delta_extra, "mechanism": self.mechanism,
                "label": self.label, "rho": self.rho, "meta": self.meta}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReleaseCost:
        rdp = tuple(math.inf if r == "inf" else float(r) for r in data["rdp"])
        if len(rdp) != len(ORDERS):
            raise MessageError(f"ledger entry rdp must have {len(ORDERS)} orders, got {len(rdp)}")
        return cls(epsilon=float(data["epsilon"]), delta=float(data["delta"]), rdp=rdp,
                   neighbouring=_check_relation(data["neighbouring"]), delta_extra=float(data.get("delta_extra", 0)),
                   mechanism=str(data.get("mechanism", "")), label=str(data.get("label", "")),
                   rho=None if data.get("rho") is None else float(data["rho"]), meta=dict(data.get("meta", {})))


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else "inf"


def _check_relation(neighbouring: Any) -> str:
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise param_error("neighbouring", "one of " + ", ".join(repr(r) for r in NEIGHBOURING_RELATIONS),
                          neighbouring)
    return str(neighbouring)


def compose(costs: Sequence[ReleaseCost], delta: float) -> dict[str, Any]:
    """The composed guarantee of ``costs`` (one relation) at ``delta``: RDP and basic, and the better.

    Returns
    -------
    dict
        ``{"epsilon", "delta", "method", "rdp": {"epsilon", "delta", "order"},
        "basic": {"epsilon", "delta"}, "releases"}``.  ``epsilon``/``delta`` is
        whichever of the two is valid at the smaller epsilon among those with
        delta <= the requested one (RDP's delta is ``delta + sum delta_extra``).
    """
    delta = check_delta("delta", delta)
    if not costs:
        return {"epsilon": 0.0, "delta": 0.0, "method": "none", "releases": 0,
                "rdp": {"epsilon": 0.0, "delta": 0.0, "order": None}, "basic": {"epsilon": 0.0, "delta": 0.0}}
    # Releases without an RDP curve (plaintext baselines) join by basic composition: the RDP part is
    # converted at what is left of delta, then their epsilons and deltas add (sequential composition).
    curved = [c for c in costs if all(math.isfinite(r) for r in c.rdp)]
    flat = [c for c in costs if c not in curved]
    extra = math.fsum(c.delta_extra for c in curved) + math.fsum(c.delta for c in flat)
    total = [math.fsum(c.rdp[i] for c in curved) for i in range(len(ORDERS))]
    target = delta - extra
    if not curved:
        eps_rdp, order = (math.fsum(c.epsilon for c in flat), float("nan")) if target >= 0 else (math.inf, math.nan)
    elif target > 0:
        eps_rdp, order = rdp_to_epsilon(ORDERS, total, target)
        eps_rdp += math.fsum(c.epsilon for c in flat)
    else:
        eps_rdp, order = math.inf, float("nan")
    rdp = {"epsilon": eps_rdp, "delta": delta, "order": order}
    basic = {"epsilon": math.fsum(c.epsilon for c in costs), "delta": min(1.0, math.fsum(c.delta for c in costs))}
    use_basic = basic["delta"] <= delta and basic["epsilon"] <= eps_rdp
    best = basic if use_basic else rdp
    return {"epsilon": best["epsilon"], "delta": best["delta"], "method": "basic" if use_basic else "rdp",
            "rdp": rdp, "basic": basic, "releases": len(costs)}


class PrivacyLedger:
    """A JSON ledger of releases on one dataset, with an optional total budget.

    Parameters
    ----------
    path : str or Path
        The ledger file (created on the first :meth:`record`).
    budget_epsilon, budget_delta : float or None
        Declare (or confirm) the total budget.  A ledger's budget is fixed
        once declared: a different value raises ParameterError.  ``budget_delta``
        is also the delta at which the composed epsilon is reported (without a
        budget: twice the recorded deltas, at least 1e-5).

    Examples
    --------
    >>> import tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()
    >>> led = PrivacyLedger(os.path.join(tmp.name, "ledger.json"), budget_epsilon=2.0, budget_delta=1e-5)
    >>> c = ReleaseCost.from_zcdp(0.03, epsilon=1.0, delta=1e-5, neighbouring="add/remove-one")
    >>> _ = led.record(c)
    >>> round(led.spent()["epsilon"], 3)
    0.99
    >>> tmp.cleanup()
    """

    def __init__(self, path: str | os.PathLike[str], *, budget_epsilon: float | None = None,
                 budget_delta: float | None = None, what: str = "ledger file") -> None:
        self.path = Path(path)
        self.what = what  # its name in file errors (the CLI passes its option, "--ledger")
        self.entries: list[dict[str, Any]] = []
        self.budget: dict[str, float] | None = None
        self.neighbouring: str | None = None
        if self.path.exists():
            self._load()
        if budget_epsilon is not None or budget_delta is not None:
            if budget_epsilon is None or budget_delta is None:
                raise ParameterError("--budget-epsilon and --budget-delta must be given together, got one")
            new = {"epsilon": check_positive("budget_epsilon", budget_epsilon),
                   "delta": check_delta("budget_delta", budget_delta)}
            if self.budget is not None and self.budget != new:
                raise param_error("budget", f"the ledger's declared {self.budget}", new)
            self.budget = new

    @contextmanager
    def transaction(self) -> Iterator[PrivacyLedger]:
        """Check, release and record under an exclusive lock on the ledger (its ``.lock`` sidecar).

        The entries are read again inside the lock, so several processes
        that share one budget (sessions of one service, owners' runs)
        cannot both pass :meth:`check` and then both :meth:`record`: the
        second sees the first's entry.
        """
        with exclusive_lock(self.path, what=self.what):
            if self.path.exists():
                budget = self.budget
                self._load()
                if budget is not None and self.budget is None:
                    self.budget = budget  # declared by this process, not yet written
            yield self

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
            if int(data["version"]) != LEDGER_VERSION:
                raise MessageError(f"ledger version must be {LEDGER_VERSION}, got {data['version']!r}")
            self.entries = list(data["entries"])
            self.budget = data.get("budget")
            self.neighbouring = data.get("neighbouring")
            for e in self.entries:
                ReleaseCost.from_dict(e["cost"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: nested too deep
            if isinstance(exc, DpdpcaError):
                raise
            raise MessageError(f"ledger file {str(self.path)!r} must be a dpdpca ledger, got "
                               f"{type(exc).__name__}") from None

    @property
    def report_delta(self) -> float:
        """The budget's delta; without a budget, twice the recorded deltas (at least 1e-5, at most 0.5)."""
        if self.budget:
            return float(self.budget["delta"])
        total = math.fsum(float(e["cost"]["delta"]) + float(e["cost"].get("delta_extra", 0.0)) for e in self.entries)
        return min(0.5, max(1e-5, 2.0 * total))

    def costs(self) -> list[ReleaseCost]:
        """Recorded costs, in the ledger's relation."""
        rel = self.neighbouring or REPLACE_ONE
        return [ReleaseCost.from_dict(e["cost"]).as_relation(rel) for e in self.entries]

    def spent(self) -> dict[str, Any]:
        """The composed guarantee of every recorded release (:func:`compose`), and its relation."""
        out = compose(self.costs(), self.report_delta)
        out["neighbouring"] = self.neighbouring
        out["budget"] = self.budget
        return out

    def check(self, cost: ReleaseCost) -> dict[str, Any]:
        """The composed guarantee if ``cost`` were added; raises BudgetExceededError past the budget.

        Raises
        ------
        BudgetExceededError
            The composition would exceed the declared (epsilon, delta).
        ParameterError
            A replace-one release into an add/remove-one ledger.
        """
        return self.check_all([cost])

    def check_all(self, costs: Sequence[ReleaseCost]) -> dict[str, Any]:
        """:meth:`check` for several releases at once (a sweep): all or nothing.

        A fresh ledger takes replace-one if any of ``costs`` is replace-one
        (add/remove costs convert to it), else add/remove-one.
        """
        if not costs:
            return self.spent()
        if self.neighbouring is None:
            self.neighbouring = (REPLACE_ONE if any(c.neighbouring == REPLACE_ONE for c in costs)
                                 else costs[0].neighbouring)
        rel = self.neighbouring
        after = compose(self.costs() + [c.as_relation(rel) for c in costs], self.report_delta)
        if self.budget is not None and after["epsilon"] > self.budget["epsilon"] * (1 + 1e-12):
            raise BudgetExceededError(
                f"release must keep the ledger {str(self.path)!r} within its budget (epsilon="
                f"{self.budget['epsilon']:g}, delta={self.budget['delta']:g}), got composed epsilon "
                f"{after['epsilon']:.4g} after {after['releases']} releases ({after['method']})")
        return after

    def record(self, cost: ReleaseCost, *, ran: bool = False) -> dict[str, Any]:
        """Check, append and write the ledger atomically; return the composed guarantee.

        ``ran=True``: the release has already run (it was checked at a price
        made before it ran, and its cost as it ran is known only now), so it
        is written whatever the budget says, and a BudgetExceededError past
        the budget is raised after the write: the ledger never holds less
        than what was spent.
        """
        try:
            after = self.check(cost)
        except BudgetExceededError:
            if ran:
                self._append(cost)
            raise
        self._append(cost)
        return after

    def _append(self, cost: ReleaseCost) -> None:
        self.entries.append({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cost": cost.to_dict()})
        self._write()

    def _write(self) -> None:
        data = {"version": LEDGER_VERSION, "budget": self.budget, "neighbouring": self.neighbouring,
                "orders": list(ORDERS), "entries": self.entries}
        atomic_write_json(self.path, data, what=self.what)
