"""Per-party, per-phase timings and bytes sent, as every result reports them."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["Timings"]


class Timings:
    """Wall-clock seconds per party and phase, plus the critical path.

    Parties are named ``"role"`` or ``"role:id"`` (``"owner:3"``).  Parties of a
    role listed in ``parallel_roles`` work at the same time in a real
    deployment, so the critical path counts only the slowest of them; every
    other party is counted in full (sequential), except its phases listed in
    ``overlapping_phases`` (default ``"precompute"``: work that depends on no
    other party's message, such as the proxy's rerandomizers made while the
    collection is open), which run at the same time as the parallel roles.

    Examples
    --------
    >>> t = Timings(parallel_roles=("owner",))
    >>> t.add("owner:1", "encrypt", 2.0); t.add("owner:2", "encrypt", 3.0)
    >>> t.add("proxy", "aggregate", 1.0)
    >>> t.critical_path_s()
    4.0
    >>> t.add("proxy", "precompute", 2.5)   # overlaps the owners' 3.0 s
    >>> t.critical_path_s(), t.total_s()
    (4.0, 8.5)
    >>> t.add("owner:2", "precompute", 1.0)  # offline: made before the data arrive
    >>> t.critical_path_s(), t.critical_path_s(online=True), t.offline_s("owner:2")
    (5.0, 4.0, 1.0)
    """

    #: Phases that depend on public parameters only (made before the data or the shares arrive).
    OFFLINE_PHASES = ("precompute", "precompute_noise")

    def __init__(self, *, parallel_roles: tuple[str, ...] = ("owner",),
                 overlapping_phases: tuple[str, ...] = OFFLINE_PHASES) -> None:
        self.parallel_roles = tuple(parallel_roles)
        self.overlapping_phases = tuple(overlapping_phases)
        self._phases: dict[str, dict[str, float]] = {}
        self._cpu: dict[str, dict[str, float]] = {}

    def add(self, party: str, phase: str, seconds: float, *, cpu_s: float | None = None) -> None:
        """Add ``seconds`` to ``party``'s ``phase`` (and ``cpu_s``, default ``seconds``, to its CPU time)."""
        phases = self._phases.setdefault(party, {})
        phases[phase] = phases.get(phase, 0.0) + float(seconds)
        cpu = self._cpu.setdefault(party, {})
        cpu[phase] = cpu.get(phase, 0.0) + float(seconds if cpu_s is None else cpu_s)

    @contextmanager
    def measure(self, party: str, phase: str) -> Iterator[None]:
        """Context manager that times its body into ``party``/``phase`` (wall clock, and this
        thread's CPU time: other load on the machine stretches the first, not the second).

        The CPU time is the calling thread's, not the process's: another party's background
        thread in the same process (the proxy's noise, owners' factors made ahead) is not
        booked to this phase; work the body hands to other threads or processes is not in it.
        """
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.add(party, phase, time.perf_counter() - start, cpu_s=time.thread_time() - cpu)

    def merge(self, other: "Timings") -> None:
        """Add every phase of ``other`` into this one."""
        for party, phases in other._phases.items():
            for phase, sec in phases.items():
                self.add(party, phase, sec, cpu_s=other._cpu.get(party, {}).get(phase))

    def party_total(self, party: str) -> float:
        return sum(self._phases.get(party, {}).values())

    def total_s(self) -> float:
        """Sum over every party: the CPU-style total if nothing ran in parallel."""
        return sum(self.party_total(p) for p in self._phases)

    def critical_path_s(self, *, online: bool = False) -> float:
        """Sequential parties in full, plus the slowest party of each parallel role or the longest
        overlapping phase of a sequential party, whichever is longer.

        ``online``: without the offline phases (:attr:`OFFLINE_PHASES`: work
        that depends on public parameters only and can be made before the
        session, e.g. an owner's DJN factors or the proxy's rerandomizers).
        """
        slowest: dict[str, float] = {}
        overlap = 0.0
        total = 0.0
        for party, phases in self._phases.items():
            role = party.split(":", 1)[0]
            if role in self.parallel_roles:
                slowest[role] = max(slowest.get(role, 0.0), self.online_s(party) if online else self.party_total(party))
                continue
            beside = 0.0  # a party's overlapping phases run one after the other
            for phase, sec in phases.items():
                if online and phase in self.OFFLINE_PHASES:
                    continue
                if phase in self.overlapping_phases:
                    beside += sec
                else:
                    total += sec
            overlap = max(overlap, beside)
        return total + max(sum(slowest.values()), overlap)


    def offline_s(self, party: str) -> float:
        """``party``'s seconds in offline phases."""
        return sum(sec for ph, sec in self._phases.get(party, {}).items() if ph in self.OFFLINE_PHASES)

    def online_s(self, party: str) -> float:
        """``party``'s seconds in every other phase."""
        return self.party_total(party) - self.offline_s(party)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``parties`` (party -> phase -> s), ``total_s``, ``critical_path_s``,
        ``online_critical_path_s``, and per party ``offline_s`` and ``online_s``."""
        return {
            "parties": {p: dict(ph) for p, ph in self._phases.items()},
            "total_s": self.total_s(),
            "critical_path_s": self.critical_path_s(),
            "online_critical_path_s": self.critical_path_s(online=True),
            "offline_s": {p: self.offline_s(p) for p in self._phases},
            "online_s": {p: self.online_s(p) for p in self._phases},
            "cpu_s": {p: dict(ph) for p, ph in self._cpu.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, parallel_roles: tuple[str, ...] = ("owner",)) -> "Timings":
        t = cls(parallel_roles=parallel_roles)
        for party, phases in data.get("parties", {}).items():
            for phase, sec in phases.items():
                t.add(party, phase, sec, cpu_s=data.get("cpu_s", {}).get(party, {}).get(phase))
        return t
