"""A validated run: the options, the partitions by owner id, who is present, the public bounds.

:func:`plan_run` checks the partitions against the options once (one-line
errors, before anyone encrypts); every launcher receives the :class:`RunPlan`
(:mod:`dpdpca.protocol.runner`, :mod:`dpdpca.protocol.processes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from dpdpca._validation import check_int, param_error
from dpdpca.data import check_partitions
from dpdpca.errors import DataError, OverflowRiskError
from dpdpca.protocol.config import ProtocolOptions

__all__ = ["RunPlan", "plan_run", "owner_ids"]


def owner_ids(n: int) -> list[str]:
    """Default owner ids ``"1"`` ... ``"n"``."""
    return [str(i) for i in range(1, n + 1)]


@dataclass(frozen=True)
class RunPlan:
    """A validated run: the options, the partitions by owner id, who is present, the public bounds.

    Built by :func:`plan_run`; what every launcher receives.
    """

    options: ProtocolOptions
    partitions: dict[str, np.ndarray]
    present: list[str]
    n_components: int
    max_owners: int
    max_rows_per_owner: int

    @property
    def ids(self) -> list[str]:
        return list(self.partitions)

    @property
    def d(self) -> int:
        """The number of features, declared in the run's public parameters (every partition has it)."""
        return int(next(iter(self.partitions.values())).shape[1])

    @property
    def quorum(self) -> int:
        """Shares the proxy waits for (default: every present owner)."""
        q = self.options.deployment.quorum
        return len(self.present) if q is None else q

    def param_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`ProtocolParams.create` for the data user's key pair.

        The key serves this one run, whose release and budget are known, so
        the parameters declare them: the layout is made for this release
        (:attr:`ProtocolParams.release`) and the noise allowance for this
        (epsilon, delta), with epsilon floored at 1.  The floor: the
        distributed calibration's per-owner sigma stops shrinking at very large
        epsilon (1.4e7 integer units at epsilon = 1e9, d = 4), past
        :func:`~dpdpca.protocol.params.add_remove_sigma_bound`; for epsilon
        <= 1 it stays below 0.65 of that bound over d in {1, 64, 784}, 2 to
        100 owners and delta in [1e-12, 0.1] (checked by a test).
        """
        key, rel = self.options.key, self.options.release
        return dict(max_owners=self.max_owners, max_rows_per_owner=self.max_rows_per_owner, frac_bits=key.frac_bits,
                    kappa=key.kappa, min_epsilon=min(rel.epsilon, 1.0), min_delta=rel.delta, packing=key.packing,
                    release=rel.mode, d=self.d)

    def owner_noise(self, d: int, frac_bits: int) -> Any:
        """Each owner's share of the distributed noise (None unless ``noise_by="owners"``)."""
        return self.options.release.owner_noise(d=d, frac_bits=frac_bits, owners=len(self.partitions),
                                                quorum=self.options.deployment.quorum, present=len(self.present))


def plan_run(partitions: Sequence[Any], *, n_components: int, options: ProtocolOptions) -> RunPlan:
    """Validate the partitions against the options (one-line errors, before anyone encrypts).

    Raises
    ------
    DataError, ParameterError, OverflowRiskError
    """
    parts = check_partitions(list(partitions))
    L = len(parts)
    rel, dep, bounds = options.release, options.deployment, options.bounds
    rel.check_owners(owners=L, quorum=dep.quorum)
    d = parts[0].shape[1]
    k = check_int("n_components", n_components, minimum=1, maximum=d)
    ids = owner_ids(L)
    absent = {check_int("absent_owners[i]", a, minimum=0, maximum=L - 1) for a in dep.absent_owners}
    present = [i for i in range(L) if i not in absent]
    if not present:
        raise param_error("absent_owners", f"fewer than the {L} owners", len(absent))
    total_rows = sum(parts[i].shape[0] for i in present)
    if total_rows < 2:  # refused before anyone encrypts
        raise DataError(f"rows in total must be >= 2 (the centred scatter of one row is 0), got {total_rows}")
    if dep.quorum is not None:
        check_int("quorum", dep.quorum, minimum=1, maximum=L)
    declared_owners = L if bounds.max_owners is None else check_int("max_owners", bounds.max_owners, minimum=1)
    if L > declared_owners:
        raise OverflowRiskError(f"owners must be <= max_owners={declared_owners} (the declared slot width), got {L}")
    declared_rows = max(p.shape[0] for p in parts) if bounds.max_rows_per_owner is None else \
        check_int("max_rows_per_owner", bounds.max_rows_per_owner, minimum=1)
    return RunPlan(options, dict(zip(ids, parts)), [ids[i] for i in present], k, declared_owners, declared_rows)
