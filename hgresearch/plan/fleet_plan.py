"""A solved fleet plan (:func:`hgresearch.plan.solve.solve`): replicas per configuration and
hour, the traffic of every class routed to each, what it costs and emits, and the replicas its
rates assumed (for its simulated check and its fleet file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hgresearch.identity import hardware_label
from hgresearch.plan.inputs import PlanProblem
from hgresearch.units import TOKENS_PER_MILLION

if TYPE_CHECKING:
    from hgresearch.sim.calibrate import Calibration


@dataclass
class Plan:
    """A solved plan: replicas per configuration and hour, traffic per class, configuration and
    hour, and what it costs and emits."""

    problem: PlanProblem
    objective: str
    labels: list[str]
    classes: list[str]
    replicas: np.ndarray        # (J, H) int
    traffic_rps: np.ndarray     # (K, J, H)
    cap_rps: np.ndarray         # (K, J) the capacities the plan assumed
    cost_usd_per_h: np.ndarray  # (H,)
    carbon_g_per_h: np.ndarray  # (H,)
    tokens_per_h: np.ndarray    # (H,)
    replica_cost_usd_per_h: np.ndarray  # (J,)
    replica_carbon_g_per_h: np.ndarray  # (J, H)
    solve_s: float
    capacity_source: str = ""
    step_times: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Constant ms added to every TTFT per configuration label (the capacities assumed it).
    ttft_offsets_ms: dict[str, float] = field(default_factory=dict)
    #: Calibrations the capacities' replicas ran, by configuration label (the check runs them).
    fits: dict[str, Calibration] = field(default_factory=dict)
    #: The slow end the capacities assumed (every step this many times as long; 1: nominal).
    step_time_factor: float = 1.0
    #: Fraction of the slow-end capacity every replica is kept free of.
    headroom: float = 0.0
    #: (K, J) one replica's rate at the nominal step times, and at the slow end (no headroom).
    nominal_cap_rps: np.ndarray | None = None
    slow_cap_rps: np.ndarray | None = None

    @property
    def hours(self) -> int:
        """Number of planning periods."""
        return int(self.replicas.shape[1])

    def fleet(self, hour: int = 0) -> pd.DataFrame:
        """Configurations in use in ``hour``: replicas, price, cost and carbon per hour, rate
        routed to them and their load: ``load_fraction`` of the capacity the plan used (the
        slow end less the headroom), ``load_vs_slow_end`` of the slow-end rate,
        ``load_vs_nominal`` of the rate at the nominal step times."""
        rows = []
        for j, label in enumerate(self.labels):
            count = int(self.replicas[j, hour])
            if count == 0:
                continue
            candidate = self.problem.candidates[j]
            rate = float(self.traffic_rps[:, j, hour].sum())
            load, slow, nominal = (self._load(caps, j, hour) for caps in (
                self.cap_rps, self.slow_cap_rps, self.nominal_cap_rps))
            rows.append({"config": label, "gpu_name": candidate.gpu_name,
                         "num_gpus": candidate.num_gpus, "replicas": count,
                         "price_usd_per_gpu_h": self.replica_cost_usd_per_h[j]
                         / candidate.num_gpus,
                         "cost_usd_per_h": count * self.replica_cost_usd_per_h[j],
                         "carbon_g_per_h": count * self.replica_carbon_g_per_h[j, hour],
                         "rate_rps": rate, "rate_per_replica_rps": rate / count,
                         "load_fraction": load / count,
                         "load_vs_slow_end": slow / count, "load_vs_nominal": nominal / count})
        return pd.DataFrame(rows, columns=["config", "gpu_name", "num_gpus", "replicas",
                                           "price_usd_per_gpu_h", "cost_usd_per_h",
                                           "carbon_g_per_h", "rate_rps", "rate_per_replica_rps",
                                           "load_fraction", "load_vs_slow_end",
                                           "load_vs_nominal"])

    def _load(self, caps: np.ndarray | None, j: int, hour: int) -> float:
        """Configuration ``j``'s traffic in ``hour`` as replicas' worth of ``caps`` (NaN when
        not known)."""
        if caps is None:
            return float("nan")
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.nansum(np.where(caps[:, j] > 0,
                                            self.traffic_rps[:, j, hour] / caps[:, j], 0.0)))

    def shares(self, hour: int = 0) -> pd.DataFrame:
        """Routing shares: per traffic class (rows), the fraction sent to each configuration
        (columns) in ``hour``; classes without demand have no row."""
        demand = self.traffic_rps[:, :, hour].sum(axis=1)
        rows = {name: self.traffic_rps[k, :, hour] / demand[k]
                for k, name in enumerate(self.classes) if demand[k] > 0}
        return pd.DataFrame(rows, index=self.labels).T

    def totals(self) -> dict[str, float]:
        """Cost and carbon per hour (mean over hours) and per 1M tokens (input + output) over
        the whole horizon."""
        tokens = float(self.tokens_per_h.sum())
        return {"cost_usd_per_h": float(self.cost_usd_per_h.mean()),
                "carbon_g_per_h": float(self.carbon_g_per_h.mean()),
                "cost_usd_per_1m_tok": float(self.cost_usd_per_h.sum())
                / (tokens / TOKENS_PER_MILLION),
                "g_co2_per_1m_tok": float(self.carbon_g_per_h.sum())
                / (tokens / TOKENS_PER_MILLION),
                "gpus": float((self.replicas * np.array(
                    [c.num_gpus for c in self.problem.candidates])[:, None]).sum(axis=0).max())}

    def describe(self, hour: int = 0) -> str:
        """``1x H100-PCIe + 3 x (2x RTX-4090)`` (:func:`hgresearch.identity.hardware_label`)."""
        fleet = self.fleet(hour)
        return " + ".join(hardware_label(r.gpu_name, r.num_gpus, r.replicas)
                          for r in fleet.itertuples()) or "(none)"
