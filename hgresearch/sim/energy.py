"""Energy of a simulated run, step by step, from utilisation.

Each engine step's power is ``P_idle + (P_max − P_idle) × u`` per GPU
(:func:`hgresearch.accounting.energy.modelled_power_w` with the ``linear`` curve and the power-model
catalog's ``p_idle_w``/``p_max_w``), where ``u`` is the utilisation of the resource that bounds
the step on the roofline: the time the step needs on it (bytes / bandwidth or FLOPs / peak,
:class:`~hgresearch.sim.step_time.RooflineFloor`) over the step's time. Between steps (an idle
engine) the GPUs draw ``P_idle``. Not throughput over a peak: a decode step that reads the
weights at 72% of the bandwidth is 72% busy however few tokens it produces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hgresearch.accounting.energy import modelled_power_w
from hgresearch.data.catalogs import power_model_catalog
from hgresearch.errors import InputError
from hgresearch.sim.step_time import LinearStepTimeModel


@dataclass
class StepEnergyMeter:
    """A step-time model that also adds up each step's energy (wraps a
    :class:`LinearStepTimeModel` with a roofline floor). Use it in place of the wrapped model,
    then read :meth:`energy_j` for the run's duration."""

    inner: LinearStepTimeModel
    p_idle_w: float
    p_max_w: float
    num_gpus: int = 1
    busy_s: float = field(default=0.0, init=False)
    steps_energy_j: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if self.inner.floor is None:
            raise InputError("energy per step needs the roofline floor (catalog bandwidth and "
                             "FLOPS) of the hardware", field="gpu")

    def step_time_s(self, prefill_tokens: int, decode_seqs: int, kv_tokens_read: int) -> float:
        """The wrapped step time; records the step's energy."""
        t = self.inner.step_time_s(prefill_tokens, decode_seqs, kv_tokens_read)
        bound_s = self.inner.floor.floor_s(prefill_tokens, decode_seqs, kv_tokens_read)
        self.busy_s += t
        self.steps_energy_j += t * self.num_gpus * float(
            modelled_power_w(bound_s / t, self.p_idle_w, self.p_max_w, "linear"))
        return t

    def energy_j(self, duration_s: float) -> float:
        """Energy (J) of all GPUs over ``duration_s``: the steps' plus idle power for the
        rest (the engine's time without a step)."""
        idle_s = max(duration_s - self.busy_s, 0.0)
        return self.steps_energy_j + idle_s * self.num_gpus * self.p_idle_w


def energy_meter(step_model: LinearStepTimeModel, gpu_name: str,
                 num_gpus: int) -> StepEnergyMeter:
    """:class:`StepEnergyMeter` with the central idle and busy power of ``gpu_name``
    (``hgresearch/data/catalogs/power_model.csv``); :class:`InputError` for a GPU the catalog
    lacks."""
    catalog = power_model_catalog().set_index("gpu_name")
    if gpu_name not in catalog.index:
        raise InputError(f"no power model for {gpu_name!r} (known: {sorted(catalog.index)})",
                         field="gpu_name")
    row = catalog.loc[gpu_name]
    return StepEnergyMeter(step_model, float(row.p_idle_w), float(row.p_max_w), num_gpus)
