"""A basic-composition cost from a release's own privacy report.

The protocol's releases are priced by the calibration that draws their noise
(:class:`dpdpca.protocol.releases.ReleaseNoise`, ``Proxy.finish(ledger=...)``);
this module keeps the mathematics that needs no party: a cost from a
:class:`~dpdpca.dp.report.PrivacyReport` whose RDP curve is unknown.
"""

from __future__ import annotations

import math
from typing import Any

from dpdpca.dp.accountant import ReleaseCost
from dpdpca.dp.report import PrivacyReport

__all__ = ["cost_from_report"]


def cost_from_report(report: PrivacyReport | dict[str, Any], *, label: str = "") -> ReleaseCost:
    """A basic-composition cost from a release's own report (its RDP curve unknown: infinite)."""
    rep = report if isinstance(report, PrivacyReport) else PrivacyReport.from_dict(report)
    return ReleaseCost.from_rdp(lambda a: math.inf, epsilon=rep.epsilon, delta=rep.delta,
                                neighbouring=rep.neighbouring, mechanism=rep.mechanism, label=label)
