"""What every benchmark run records about itself: seed, versions, machine, wall time.

A figure without the software and machine it came from cannot be checked;
:func:`run_record` gathers them in one JSON-ready dict that each benchmark
stores under the key ``"run"``.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
import time
from typing import Any

__all__ = ["run_record", "versions"]

#: Distributions whose versions a result depends on (absent ones are reported as None).
_PACKAGES = ("dpdpca", "numpy", "scipy", "gmpy2", "phe", "click", "scikit-learn", "matplotlib")


def versions() -> dict[str, str | None]:
    """Installed versions of Python and of the packages results depend on."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    if out["dpdpca"] is None:  # run from a source tree, not installed
        from dpdpca import __version__

        out["dpdpca"] = f"{__version__} (source tree)"
    return out


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # pragma: no cover - not on every OS
        return None


def run_record(*, seed: int | None, started: float, command: str | None = None) -> dict[str, Any]:
    """Seed, versions, machine and wall time of a run that began at ``started``.

    Parameters
    ----------
    seed : int or None
        The experiment seed (None: OS entropy, not reproducible).
    started : float
        ``time.perf_counter()`` at the start of the run.
    command : str or None
        The command line, when known (default: ``sys.argv`` joined).

    Returns
    -------
    dict
        ``seed``, ``versions``, ``machine`` (``cpu_count``, ``platform``,
        ``processor``, ``load_average``: the 1, 5 and 15 minute load at the end,
        None where the OS has none, so a reader can judge how shared the
        machine was), ``wall_s``, ``finished_utc``, ``command``.

    Examples
    --------
    >>> r = run_record(seed=0, started=time.perf_counter())
    >>> sorted(r) == ['command', 'finished_utc', 'machine', 'seed', 'versions', 'wall_s']
    True
    """
    return {
        "seed": seed,
        "versions": versions(),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "processor": platform.machine(), "load_average": _load_average()},
        "wall_s": time.perf_counter() - started,
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command if command is not None else " ".join(["dpdpca", *sys.argv[1:]]),
    }
