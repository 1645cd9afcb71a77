"""The TDP model, exactly as the paper (its Table 3): every GPU draws its full TDP for the whole
run.

Power of a configuration = GPU count x replicas x TDP; tokens per hour = token throughput x
seconds per hour; tokens per kWh = tokens per hour / kWh per hour; g CO2 per 1M tokens = grid
intensity / (tokens per kWh / 1e6). The paper uses 700 W for the H100 PCIe (the SXM figure; the
PCIe board's limit is 350 W, see ``hgresearch/data/catalogs/hardware.csv``) and 450 W for the
RTX 4090: ``tdp="paper"`` reproduces that, ``tdp="datasheet"`` uses the catalog's TDP.

The unit formulas here (kWh per hour, tokens per kWh, energy per token, g CO2 per 1M tokens) are
the ones every energy and carbon figure uses, measured or modelled.
"""

from __future__ import annotations

from enum import StrEnum

import pandas as pd

from hgresearch.data.catalogs import hardware_catalog
from hgresearch.errors import InputError
from hgresearch.identity import total_gpus
from hgresearch.units import J_PER_KWH, TOKENS_PER_MILLION, Number, tokens_per_h

#: TDP per GPU the paper assumed for its energy table (W). The H100 PCIe value is the paper's
#: 700 W (the SXM module's TDP); the PCIe board's limit is 350 W (``tdp="datasheet"``).
PAPER_TDP_W: dict[str, float] = {"H100-PCIe": 700.0, "RTX-4090": 450.0}
#: The paper's grid intensity: EU-27 average 2023 (g CO2 per kWh).
PAPER_GRID_G_PER_KWH = 242.0


class TdpAssumption(StrEnum):
    """The TDP behind the TDP energy model (:func:`tdp_per_gpu_w`'s ``tdp``)."""

    PAPER = "paper"          # the paper's 700 W for the H100 PCIe
    DATASHEET = "datasheet"  # the hardware catalog's tdp_w (350 W for the H100 PCIe)


def tdp_per_gpu_w(gpu_name: str, tdp: str = "paper",
                  overrides: dict[str, float] | None = None) -> float:
    """Assumed power of one GPU (W).

    ``tdp="paper"`` uses :data:`PAPER_TDP_W` (falling back to the catalog for other GPUs),
    ``"datasheet"`` the ``tdp_w`` of ``hgresearch/data/catalogs/hardware.csv``. ``overrides`` wins
    over both.
    NaN when the GPU has no TDP (e.g. ``CPU``).
    """
    if overrides and gpu_name in overrides:
        return float(overrides[gpu_name])
    if tdp not in set(TdpAssumption):
        raise InputError(f"expected one of {', '.join(TdpAssumption)}, got {tdp!r}",
                         field="tdp")
    if tdp == "paper" and gpu_name in PAPER_TDP_W:
        return PAPER_TDP_W[gpu_name]
    hw = hardware_catalog()
    row = hw[hw.gpu_name == gpu_name]
    if row.empty:
        raise KeyError(f"unknown GPU {gpu_name!r}; add it to hgresearch/data/catalogs/hardware.csv")
    return float(row.tdp_w.iloc[0])


def configuration_power_w(per_gpu_w: Number, gpu_count: Number,
                          replicas: Number | int = 1) -> Number:
    """Power of a configuration (W): every GPU of every replica at ``per_gpu_w``."""
    return per_gpu_w * total_gpus(gpu_count, replicas)


def kwh_per_h(power_w: Number) -> Number:
    """Energy drawn in one hour (kWh) at a constant power (W)."""
    return power_w / 1000.0


def tokens_per_kwh(tok_per_s: Number, power_w: Number) -> Number:
    """Tokens per kWh at a sustained throughput and a constant power."""
    return tokens_per_h(tok_per_s) / kwh_per_h(power_w)


def tokens_per_kwh_of_energy(tokens: Number, energy_j: Number) -> Number:
    """Tokens per kWh of ``tokens`` served with ``energy_j`` joules."""
    return tokens / (energy_j / J_PER_KWH)


def energy_per_tok_j(power_w: Number, tok_per_s: Number) -> Number:
    """Energy per token (J) at a constant power and a sustained throughput."""
    return power_w / tok_per_s


def kwh_per_1m_tok(energy_per_tok_j: Number) -> Number:
    """kWh per million tokens at an energy per token (J)."""
    return energy_per_tok_j * TOKENS_PER_MILLION / J_PER_KWH


def g_co2_per_1m_tok(tok_per_kwh: Number, grid_g_per_kwh: Number) -> Number:
    """Operational g CO2 per million tokens for a grid intensity (g CO2 per kWh)."""
    return grid_g_per_kwh / (tok_per_kwh / TOKENS_PER_MILLION)


def add_tdp_energy(runs: pd.DataFrame, tdp: str = "paper",
                   tdp_overrides: dict[str, float] | None = None,
                   grid_g_per_kwh: float = PAPER_GRID_G_PER_KWH) -> pd.DataFrame:
    """Return ``runs`` with the paper's TDP-model energy columns added.

    Adds ``tdp_assumption``, ``tdp_per_gpu_w``, ``tdp_power_w`` (whole configuration),
    ``tdp_energy_j`` (power x run duration), ``tok_per_h``, ``tdp_kwh_per_h``,
    ``tdp_tok_per_kwh``, ``tdp_energy_per_tok_j`` and ``tdp_g_co2_per_1m_tok`` (at
    ``grid_g_per_kwh``). Throughput is ``total_token_throughput_tok_per_s`` (input+output).
    """
    out = runs.copy()
    out["tdp_assumption"] = tdp
    per_gpu = {g: tdp_per_gpu_w(g, tdp, tdp_overrides) for g in out.gpu_name.unique()}
    out["tdp_per_gpu_w"] = out.gpu_name.map(per_gpu).astype(float)
    out["tdp_power_w"] = configuration_power_w(out.tdp_per_gpu_w, out.gpu_count, out.replicas)
    out["tdp_energy_j"] = out.tdp_power_w * out.duration_s
    tok_per_s = out.total_token_throughput_tok_per_s
    out["tok_per_h"] = tokens_per_h(tok_per_s)
    out["tdp_kwh_per_h"] = kwh_per_h(out.tdp_power_w)
    out["tdp_tok_per_kwh"] = tokens_per_kwh(tok_per_s, out.tdp_power_w)
    out["tdp_energy_per_tok_j"] = energy_per_tok_j(out.tdp_power_w, tok_per_s)
    out["tdp_g_co2_per_1m_tok"] = g_co2_per_1m_tok(out.tdp_tok_per_kwh, grid_g_per_kwh)
    return out


def efficiency_ratio(tok_per_kwh_a: float, tok_per_kwh_b: float) -> float:
    """How many times more tokens per kWh configuration A gives than B."""
    return tok_per_kwh_a / tok_per_kwh_b

