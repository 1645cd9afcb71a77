"""Energy per token of benchmark runs, three ways.

1. **TDP model, exactly as the paper** (its Table 3): every GPU draws its full TDP for the
   whole run. Power of a configuration = GPU count x replicas x TDP; tokens per hour =
   token throughput x seconds per hour; tokens per kWh = tokens per hour / kWh per hour;
   g CO2 per 1M tokens = grid intensity / (tokens per kWh / 1e6). The paper uses 700 W for the
   H100 PCIe (the SXM figure; the PCIe board's limit is 350 W, see
   ``hgresearch/data/catalogs/hardware.csv``) and 450 W for the RTX 4090: ``tdp="paper"`` reproduces
   that, ``tdp="datasheet"`` uses the catalog's TDP.
2. **Measured energy** from hgresearch run folders (``summary.json`` + ``telemetry.csv`` +
   ``requests.jsonl``, read with :mod:`hgresearch.data.runfolder`; see docs/measurement.md): NVML
   counter delta (or power integral) over the steady-state window, the idle baseline
   separately, and a block-bootstrap confidence interval.
3. **Utilisation-based power model** for runs without telemetry:
   ``P = P_idle + (P_max - P_idle) * f(u)`` per GPU, with ``u`` the run's token throughput
   relative to the highest throughput of the same model on the same configuration, and
   ``P_idle``/``P_max`` from ``hgresearch/data/catalogs/power_model.csv``. A lower bound (low
   powers,
   linear ``f``) and an upper bound (high powers, concave ``f``) bracket the energy per token.

Token counts are input + output tokens, as in the paper's cost and energy figures. Missing
measurements stay NaN, never zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.data.catalogs import hardware_catalog, power_model_catalog
from hgresearch.data.runfolder import (
    SUMMARY_FILE,
    find_run_dirs,
    read_requests,
    read_summary,
    read_telemetry,
)
from hgresearch.data.summary import bootstrap_intervals
from hgresearch.errors import InputError
from hgresearch.identity import CONFIG_KEYS, hardware_label, total_gpus
from hgresearch.units import J_PER_KWH, TOKENS_PER_MILLION, Number, tokens_per_h

#: TDP per GPU the paper assumed for its energy table (W). The H100 PCIe value is the paper's
#: 700 W (the SXM module's TDP); the PCIe board's limit is 350 W (``tdp="datasheet"``).
PAPER_TDP_W: dict[str, float] = {"H100-PCIe": 700.0, "RTX-4090": 450.0}
#: The paper's grid intensity: EU-27 average 2023 (g CO2 per kWh).
PAPER_GRID_G_PER_KWH = 242.0
#: Configurations of the paper's Table 3: (GPU, GPU count, request rate in QPS).
PAPER_TABLE3_CONFIGS: list[tuple[str, int, float]] = [("H100-PCIe", 1, 16.0),
                                                       ("RTX-4090", 2, 4.0)]
PAPER_TABLE3_MODEL = "DeepSeek-R1-Distill-Qwen-14B"


# ---------------------------------------------------------------------------------------------
# 1. TDP model (the paper's)
# ---------------------------------------------------------------------------------------------

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


def configuration_power_w(per_gpu_w: Number, gpu_count: Number, replicas: Number = 1) -> Number:
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


def pick_configurations(runs: pd.DataFrame, model: str,
                        configurations: Iterable[tuple[str, int, float]]) -> pd.DataFrame:
    """Rows of ``runs`` for ``model`` at each (GPU, GPU count, QPS), in the order given.

    Raises :class:`KeyError` naming the configuration when one has no run (so a typo in a
    notebook parameter is not silently dropped).
    """
    rows = []
    for gpu_name, gpu_count, qps in configurations:
        hit = runs[(runs.model == model) & (runs.gpu_name == gpu_name)
                   & (runs.gpu_count == int(gpu_count)) & (runs.request_rate_qps == float(qps))
                   & (runs.replicas == 1)]
        if hit.empty:
            raise KeyError(f"no run of {model} on {hardware_label(gpu_name, gpu_count)} "
                           f"at {qps} QPS")
        rows.append(hit)
    return pd.concat(rows, ignore_index=True)


def table3(runs: pd.DataFrame, model: str = PAPER_TABLE3_MODEL,
           configurations: Iterable[tuple[str, int, float]] = tuple(PAPER_TABLE3_CONFIGS),
           tdp: str = "paper", tdp_overrides: dict[str, float] | None = None,
           grid_g_per_kwh: float = PAPER_GRID_G_PER_KWH) -> pd.DataFrame:
    """The paper's Table 3: energy efficiency of the chosen configurations under the TDP model.

    ``runs`` should hold one run per point (``select_repeats(runs, "first")``: the paper's
    14B H100 points were run twice and the first run is used). One row per configuration with
    throughput, tokens per hour, assumed power and kWh per hour, tokens per kWh, g CO2 per 1M
    tokens and the efficiency ratio: tokens per kWh relative to the least efficient row.
    """
    picked = add_tdp_energy(pick_configurations(runs, model, configurations), tdp,
                            tdp_overrides, grid_g_per_kwh)
    table = pd.DataFrame({
        "Hardware": picked.hardware,
        "QPS": picked.request_rate_qps,
        "TDP per GPU (W)": picked.tdp_per_gpu_w,
        "Tokens/s": picked.total_token_throughput_tok_per_s,
        "Tokens per hour (M)": picked.tok_per_h / TOKENS_PER_MILLION,
        "Energy per hour (kWh)": picked.tdp_kwh_per_h,
        "Tokens per kWh (M)": picked.tdp_tok_per_kwh / TOKENS_PER_MILLION,
        "g CO2 per 1M tokens": picked.tdp_g_co2_per_1m_tok,
    })
    table["Efficiency ratio"] = table["Tokens per kWh (M)"] / table["Tokens per kWh (M)"].min()
    return table.reset_index(drop=True)


def efficiency_ratio(tok_per_kwh_a: float, tok_per_kwh_b: float) -> float:
    """How many times more tokens per kWh configuration A gives than B."""
    return tok_per_kwh_a / tok_per_kwh_b


# ---------------------------------------------------------------------------------------------
# 3. Utilisation-based power model (bracket for runs without telemetry)
# ---------------------------------------------------------------------------------------------

#: Shapes of the load -> power curve, ``f(0) = 0``, ``f(1) = 1``.
LOAD_CURVES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # Power proportional to load above idle: the classic linear server model.
    "linear": lambda u: u,
    # Fan, Weber & Barroso (ISCA 2007) empirical server curve 2u - u^1.4 (slightly concave).
    "fan2007": lambda u: 2 * u - u ** 1.4,
    # Strongly concave: power rises quickly with the first requests in flight, as GPU decode
    # keeps the memory system busy even at small batches.
    "sqrt": lambda u: np.sqrt(u),
    # Full P_max whenever anything runs.
    "busy": lambda u: np.where(u > 0, 1.0, 0.0),
}


@dataclass(frozen=True)
class PowerModel:
    """Settings of the utilisation-based model: curve shape and parameter column per bound."""

    lower_curve: str = "linear"
    central_curve: str = "fan2007"
    upper_curve: str = "sqrt"

    def curve(self, name: str) -> Callable[[np.ndarray], np.ndarray]:
        if name not in LOAD_CURVES:
            raise KeyError(f"unknown load curve {name!r}; known: {sorted(LOAD_CURVES)}")
        return LOAD_CURVES[name]


def load_fraction(runs: pd.DataFrame) -> pd.Series:
    """Load ``u`` in [0, 1] of each run: its token throughput over the highest token throughput
    of the same model on the same configuration among ``runs`` (the saturated point of the QPS
    sweep). A proxy for how busy the GPUs were: the reference runs have no utilisation data."""
    peak = runs.groupby(CONFIG_KEYS, dropna=False).total_token_throughput_tok_per_s.transform("max")
    return (runs.total_token_throughput_tok_per_s / peak).clip(0.0, 1.0)


def modelled_power_w(u: np.ndarray | float, p_idle_w: float, p_max_w: float,
                     curve: str = "linear") -> np.ndarray:
    """Power of one GPU at load ``u``: ``P_idle + (P_max - P_idle) * f(u)``."""
    u = np.clip(np.asarray(u, dtype=float), 0.0, 1.0)
    return p_idle_w + (p_max_w - p_idle_w) * LOAD_CURVES[curve](u)


def add_power_model(runs: pd.DataFrame, model: PowerModel | None = None,
                    parameters: pd.DataFrame | None = None,
                    load: pd.Series | None = None) -> pd.DataFrame:
    """Return ``runs`` with the utilisation-based power bracket added.

    Adds ``load_frac`` and, for each bound ``low``/``central``/``high`` of power,
    ``model_power_<b>_w`` (whole configuration), ``model_tok_per_kwh_<b>`` and
    ``model_energy_per_tok_<b>_j``. The ``low`` power uses the low parameters with the lower
    curve; ``high`` the high parameters with the upper curve, so the energy bracket is
    [``model_energy_per_tok_low_j``, ``model_energy_per_tok_high_j``]. GPUs missing from the
    parameter table get NaN. ``load`` overrides :func:`load_fraction` (e.g. measured
    utilisation).
    """
    model = model or PowerModel()
    params = power_model_catalog() if parameters is None else parameters
    params = params.set_index("gpu_name")
    out = runs.copy()
    out["load_frac"] = load_fraction(out) if load is None else load.astype(float)
    bounds = {"low": ("p_idle_low_w", "p_max_low_w", model.lower_curve),
              "central": ("p_idle_w", "p_max_w", model.central_curve),
              "high": ("p_idle_high_w", "p_max_high_w", model.upper_curve)}
    for bound, (idle_col, max_col, curve) in bounds.items():
        model.curve(curve)
        idle = out.gpu_name.map(params[idle_col]).astype(float)
        peak = out.gpu_name.map(params[max_col]).astype(float)
        per_gpu = idle + (peak - idle) * LOAD_CURVES[curve](out.load_frac.to_numpy())
        power_w = configuration_power_w(per_gpu, out.gpu_count, out.replicas)
        out[f"model_power_{bound}_w"] = power_w
        out[f"model_tok_per_kwh_{bound}"] = tokens_per_kwh(out.total_token_throughput_tok_per_s,
                                                           power_w)
        out[f"model_energy_per_tok_{bound}_j"] = energy_per_tok_j(
            power_w, out.total_token_throughput_tok_per_s)
    return out


def ratio_bracket(a: pd.Series, b: pd.Series) -> dict[str, float]:
    """Efficiency ratio of configuration A over B (tokens per kWh) under the power model.

    ``a`` and ``b`` are rows from :func:`add_power_model`. Returns ``central`` (both central),
    ``low``/``high``: the smallest and largest ratio over the four combinations of bounds (the
    two configurations' uncertainties treated as independent), and ``same_low``/``same_high``:
    both at their low-power or both at their high-power bound (correlated assumptions).
    """
    combos = [a[f"model_tok_per_kwh_{x}"] / b[f"model_tok_per_kwh_{y}"]
              for x in ("low", "high") for y in ("low", "high")]
    return {"central": float(a.model_tok_per_kwh_central / b.model_tok_per_kwh_central),
            "low": float(min(combos)), "high": float(max(combos)),
            "same_low": float(a.model_tok_per_kwh_low / b.model_tok_per_kwh_low),
            "same_high": float(a.model_tok_per_kwh_high / b.model_tok_per_kwh_high)}


# ---------------------------------------------------------------------------------------------
# 2. Measured energy from run folders
# ---------------------------------------------------------------------------------------------

MEASURED_COLUMNS = [
    "measured_energy_source", "measured_window_s", "measured_window_tok",
    "measured_energy_j", "measured_mean_power_w", "measured_idle_power_w",
    "measured_idle_energy_j", "measured_energy_per_tok_j", "measured_energy_per_tok_ci_low_j",
    "measured_energy_per_tok_ci_high_j", "measured_dynamic_energy_per_tok_j",
    "measured_tok_per_kwh", "measured_to_tdp_ratio", "measured_ci_method",
]


def _interp(t: np.ndarray, y: np.ndarray, at: float) -> float:
    return float(np.interp(at, t, y))


def _gpu_energy_j(gpu: pd.DataFrame, start: float, end: float) -> tuple[float, str | None]:
    gpu = gpu.sort_values("t_ns")
    t = gpu.t_ns.to_numpy(dtype="float64")
    if len(t) < 2 or t[0] > start or t[-1] < end:
        return math.nan, None  # samples do not cover the window
    counter = pd.to_numeric(gpu.energy_counter_j, errors="coerce").to_numpy()
    if not np.isnan(counter).any():
        return _interp(t, counter, end) - _interp(t, counter, start), "nvml_energy_counter"
    power = pd.to_numeric(gpu.power_w, errors="coerce").to_numpy()
    keep = ~np.isnan(power)
    if keep.sum() < 2:
        return math.nan, None
    t, power = t[keep], power[keep]
    inside = (t > start) & (t < end)
    grid = np.concatenate([[start], t[inside], [end]])
    values = np.interp(grid, t, power)
    return float(np.sum((values[1:] + values[:-1]) / 2 * np.diff(grid)) / 1e9), \
        "nvml_power_integral"


def energy_over_windows(telemetry: pd.DataFrame,
                        windows: list[tuple[float, float]]) -> tuple[float | None, str | None]:
    """Energy (J, summed over GPUs and windows) of telemetry samples
    (:func:`hgresearch.data.runfolder.read_telemetry`) and its source; (None, None) without data or
    when the samples of a GPU do not cover a window.

    Per GPU and window: the delta of NVML's cumulative total-energy counter, linearly
    interpolated at the window edges (``nvml_energy_counter``), when every sample has it;
    else the trapezoidal integral of power (``nvml_power_integral``). Windows are
    ``time.monotonic_ns()`` pairs, the clock of the samples and the request records.
    """
    if telemetry.empty or not windows:
        return None, None
    total, sources = 0.0, set()
    for _, gpu in telemetry.groupby("gpu_index"):
        for start, end in windows:
            value, source = _gpu_energy_j(gpu, start, end)
            if math.isnan(value):
                return None, None
            total += value
            sources.add(source)
    # One source name: the counter only when every GPU had it.
    source = "nvml_power_integral" if "nvml_power_integral" in sources else "nvml_energy_counter"
    return total, source


def idle_power_w(telemetry: pd.DataFrame) -> float | None:
    """Mean power of the idle baseline, summed over GPUs (W); None without idle samples."""
    idle = telemetry[telemetry.phase == "idle"]
    if idle.empty:
        return None
    per_gpu = pd.to_numeric(idle.power_w, errors="coerce").groupby(idle.gpu_index).mean()
    return None if per_gpu.isna().any() else float(per_gpu.sum())


def read_request_tokens(run_dir: str | Path) -> pd.DataFrame:
    """Per successful measured request of the run folder: ``first_token_ns``, ``done_ns``,
    ``prompt_tok``, ``output_tok`` (from :func:`hgresearch.data.runfolder.read_requests`, so a
    truncated last line, as a crash leaves it, is ignored; warm-up requests are left out)."""
    columns = ["first_token_ns", "done_ns", "prompt_tok", "output_tok"]
    table = read_requests(run_dir)
    if table.empty:
        return pd.DataFrame(columns=columns, dtype="float64")
    table = table[table.success & ~table.warmup]
    return pd.DataFrame({
        "first_token_ns": table.t_first_token_ns.astype("float64"),
        "done_ns": table.t_done_ns.astype("float64"),
        "prompt_tok": table.prompt_tokens.astype("float64"),
        "output_tok": table.output_tokens.astype("float64"),
    }).reset_index(drop=True)


def tokens_in_window(requests: pd.DataFrame, start_ns: float, end_ns: float) -> float:
    """Tokens processed inside [start, end]: a request's prompt tokens count at its first token
    (prefill done), its output tokens spread evenly between first token and completion."""
    if requests.empty:
        return math.nan
    first, done = requests.first_token_ns.to_numpy(), requests.done_ns.to_numpy()
    prompt = np.nan_to_num(requests.prompt_tok.to_numpy())
    output = np.nan_to_num(requests.output_tok.to_numpy())
    in_prompt = (first >= start_ns) & (first < end_ns)
    span = np.maximum(done - first, 1.0)
    overlap = np.clip(np.minimum(done, end_ns) - np.maximum(first, start_ns), 0.0, None)
    instant = done <= first  # everything arrived at once
    frac = np.where(instant, ((first >= start_ns) & (first < end_ns)).astype(float),
                    overlap / span)
    return float(np.sum(prompt * in_prompt) + np.sum(output * frac))


def _no_measurement() -> dict[str, Any]:
    """A :data:`MEASURED_COLUMNS` row with every value missing (NaN, sources None)."""
    result: dict[str, Any] = {c: math.nan for c in MEASURED_COLUMNS}
    result["measured_energy_source"] = None
    result["measured_ci_method"] = None
    return result


def _idle_baseline_w(telemetry: pd.DataFrame, summary: dict[str, Any]) -> float:
    """Idle power (W, all GPUs) from the ``idle`` samples, else the summary's ``idle_power_w``
    (a folder whose telemetry was dropped), else NaN."""
    idle_w = idle_power_w(telemetry)
    if idle_w is not None:
        return idle_w
    if summary.get("idle_power_w") is not None:
        return float(summary["idle_power_w"])
    return math.nan


def _steady_window_ns(summary: dict[str, Any]) -> tuple[float, float] | None:
    """The summary's steady-state window (the whole run when it has none); None when the
    summary gives no non-empty window."""
    start = summary.get("steady_start_ns", summary.get("run_start_ns"))
    end = summary.get("steady_end_ns", summary.get("run_end_ns"))
    if start is None or end is None or float(end) <= float(start):
        return None
    return float(start), float(end)


def _per_token(energy_j: float, tokens: float, window_s: float,
               idle_w: float) -> dict[str, float]:
    """Energy per token, tokens per kWh, and the idle/dynamic split when idle power is known."""
    values = {"measured_energy_per_tok_j": energy_j / tokens,
              "measured_tok_per_kwh": tokens_per_kwh_of_energy(tokens, energy_j)}
    if not math.isnan(idle_w):
        values["measured_idle_energy_j"] = idle_w * window_s
        values["measured_dynamic_energy_per_tok_j"] = (
            (energy_j - values["measured_idle_energy_j"]) / tokens)
    return values


def _bootstrap_blocks_ns(start: float, end: float, block_s: float) -> list[tuple[float, float]]:
    """[start, end] cut into blocks of ``block_s``; a sliver under half a block at the end is
    folded into the last full block."""
    edges = np.arange(start, end, block_s * 1e9)
    if end - edges[-1] < 0.5 * block_s * 1e9 and len(edges) > 1:
        edges = edges[:-1]
    edges = np.append(edges, end)
    return list(zip(edges[:-1], edges[1:], strict=True))


def _block_bootstrap_ci(run: pd.DataFrame, requests: pd.DataFrame, start: float, end: float,
                        block_s: float, n_boot: int, seed: int,
                        confidence: float) -> dict[str, Any]:
    """Moving-block bootstrap interval of energy per token over [start, end] (see
    :func:`measure_run`); empty when there are fewer than two blocks or no finite resample."""
    blocks = _bootstrap_blocks_ns(start, end, block_s)
    if len(blocks) < 2:  # nothing to resample
        return {}

    def energy_between(a: float, b: float) -> float:
        energy, _ = energy_over_windows(run, [(a, b)])
        return math.nan if energy is None else energy

    block_energy = np.array([energy_between(a, b) for a, b in blocks])
    block_tok = np.array([tokens_in_window(requests, a, b) for a, b in blocks])

    def energy_per_tok(pick: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return block_energy[pick].sum(axis=1) / block_tok[pick].sum(axis=1)

    [interval] = bootstrap_intervals(energy_per_tok, len(block_energy), n_boot, seed, confidence)
    if interval is None:
        return {}
    return {"measured_energy_per_tok_ci_low_j": interval[0],
            "measured_energy_per_tok_ci_high_j": interval[1],
            "measured_ci_method": (f"block bootstrap, {len(block_energy)} blocks of "
                                   f"{block_s:.3g} s, {n_boot} resamples, seed {seed}")}


def measure_run(run_dir: str | Path, *, block_s: float | None = None, n_boot: int = 2000,
                seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Measured energy of one run folder over its steady-state window.

    Energy: per GPU, the NVML energy counter delta when every run sample of that GPU has it
    (``nvml_energy_counter``), else the trapezoid integral of power (``nvml_power_integral``),
    summed over GPUs (:func:`energy_over_windows`). Tokens: input+output tokens processed inside
    the window (:func:`tokens_in_window`). Idle: mean summed power of the ``idle`` samples, also
    expressed as the energy an idle machine would draw over the window, so that energy per token
    can be split into idle and dynamic parts.

    Confidence interval: moving-block bootstrap over time. The window is cut into blocks of
    ``block_s`` seconds (default: window / 20, at least 1 s); each block gets its energy and
    its tokens; blocks are resampled with replacement (``n_boot`` times, seeded) and the
    ratio sum(energy) / sum(tokens) gives the interval's percentiles. Blocks keep the
    autocorrelation of power samples inside them; resampling energy and tokens together keeps
    their covariance.

    Returns a dict of :data:`MEASURED_COLUMNS`; values are NaN (source ``None``) when the folder
    has no usable telemetry. A folder without ``summary.json`` or with malformed files raises
    :class:`InputError`.
    """
    run_dir = Path(run_dir)
    summary = read_summary(run_dir)
    telemetry = read_telemetry(run_dir)
    result = _no_measurement()
    result["measured_idle_power_w"] = _idle_baseline_w(telemetry, summary)
    run = telemetry[(telemetry.phase == "run") & telemetry.power_w.notna()]
    window = _steady_window_ns(summary)
    if run.empty or window is None:
        return result
    start, end = window
    window_s = (end - start) / 1e9
    requests = read_request_tokens(run_dir)
    tokens = tokens_in_window(requests, start, end)
    energy_j, source = energy_over_windows(run, [(start, end)])
    if energy_j is None:  # the samples do not cover the window
        return result
    result.update({
        "measured_energy_source": source, "measured_window_s": window_s,
        "measured_window_tok": tokens, "measured_energy_j": energy_j,
        "measured_mean_power_w": energy_j / window_s,
    })
    if not tokens or math.isnan(tokens):
        return result
    result.update(_per_token(energy_j, tokens, window_s, result["measured_idle_power_w"]))
    result.update(_block_bootstrap_ci(run, requests, start, end,
                                      block_s or max(window_s / 20.0, 1.0), n_boot, seed,
                                      confidence))
    return result


def add_measured_energy(runs: pd.DataFrame, tdp: str = "datasheet",
                        tdp_overrides: dict[str, float] | None = None,
                        **measure_kwargs: Any) -> pd.DataFrame:
    """Return ``runs`` with the :data:`MEASURED_COLUMNS` of :func:`measure_run` for every run
    that has a ``run_dir`` (NaN otherwise, never zero).

    ``measured_to_tdp_ratio`` is measured mean power over the TDP-model power of the same
    configuration (``tdp`` assumption; the datasheet TDP by default: the board limit).
    A run folder with ``energy_j`` in its summary but no telemetry file keeps its summary's
    energy per token (source from the summary, no interval).
    """
    out = runs.copy()
    measured = []
    for row in out.itertuples():
        run_dir = getattr(row, "run_dir", None)
        if run_dir is None or (isinstance(run_dir, float) and math.isnan(run_dir)):
            values = _no_measurement()
        else:
            values = measure_run(run_dir, **measure_kwargs)
            if values["measured_energy_source"] is None and not math.isnan(row.energy_j):
                values["measured_energy_source"] = row.energy_source
                values["measured_energy_j"] = row.energy_j
                values["measured_window_s"] = row.duration_s
                values["measured_window_tok"] = float(row.total_tok)
                values["measured_mean_power_w"] = row.energy_j / row.duration_s
                values["measured_energy_per_tok_j"] = row.energy_j / row.total_tok
                values["measured_tok_per_kwh"] = tokens_per_kwh_of_energy(row.total_tok,
                                                                          row.energy_j)
        try:
            tdp_power = configuration_power_w(tdp_per_gpu_w(row.gpu_name, tdp, tdp_overrides),
                                              row.gpu_count, row.replicas)
        except KeyError:
            tdp_power = math.nan
        values["measured_to_tdp_ratio"] = values["measured_mean_power_w"] / tdp_power
        measured.append(values)
    frame = pd.DataFrame(measured, columns=MEASURED_COLUMNS, index=out.index)
    for column in MEASURED_COLUMNS:
        out[column] = frame[column]
    return out


def energy_per_run(runs: pd.DataFrame, tdp: str = "paper",
                   tdp_overrides: dict[str, float] | None = None,
                   grid_g_per_kwh: float = PAPER_GRID_G_PER_KWH,
                   power_model: PowerModel | None = None, **measure_kwargs: Any) -> pd.DataFrame:
    """All three energy estimates for every run: TDP model, power-model bracket, measured."""
    out = add_tdp_energy(runs, tdp, tdp_overrides, grid_g_per_kwh)
    out = add_power_model(out, power_model)
    return add_measured_energy(out, **measure_kwargs)


def ratio_estimates(runs: pd.DataFrame, model: str = PAPER_TABLE3_MODEL,
                    configurations: Iterable[tuple[str, int, float]]
                    = tuple(PAPER_TABLE3_CONFIGS)) -> pd.DataFrame:
    """The efficiency ratio of the first configuration over the second (tokens per kWh) under
    every estimate: TDP as the paper, datasheet TDP, the power model (central with the
    independent-bounds bracket; and with both at the same bound), and measured energy when
    both runs have it. ``runs``: output of :func:`energy_per_run` (one run per point)."""
    configurations = list(configurations)
    if len(configurations) != 2:
        raise ValueError("ratio_estimates compares exactly two configurations")
    picked = pick_configurations(runs, model, configurations)
    a, b = picked.iloc[0], picked.iloc[1]
    rows = []
    for tdp in TdpAssumption:
        t = add_tdp_energy(picked, tdp)
        watts = "/".join(f"{w:.0f} W" for w in t.tdp_per_gpu_w)
        rows.append({"estimate": f"TDP model, {tdp} TDP ({watts})",
                     "ratio": efficiency_ratio(t.tdp_tok_per_kwh.iloc[0],
                                               t.tdp_tok_per_kwh.iloc[1]),
                     "low": math.nan, "high": math.nan})
    if "model_tok_per_kwh_central" in picked:
        bracket = ratio_bracket(a, b)
        rows.append({"estimate": "Power model, central (bracket: independent bounds)",
                     "ratio": bracket["central"], "low": bracket["low"],
                     "high": bracket["high"]})
        rows.append({"estimate": "Power model, both at the same bound",
                     "ratio": bracket["central"],
                     "low": min(bracket["same_low"], bracket["same_high"]),
                     "high": max(bracket["same_low"], bracket["same_high"])})
    if "measured_tok_per_kwh" in picked and picked.measured_tok_per_kwh.notna().all():
        # Interval from the two runs' energy-per-token intervals, taken as independent bounds.
        ratio = efficiency_ratio(a.measured_tok_per_kwh, b.measured_tok_per_kwh)
        rows.append({"estimate": "Measured (NVML)", "ratio": ratio,
                     "low": b.measured_energy_per_tok_ci_low_j
                     / a.measured_energy_per_tok_ci_high_j,
                     "high": b.measured_energy_per_tok_ci_high_j
                     / a.measured_energy_per_tok_ci_low_j})
    return pd.DataFrame(rows)


def table3_repeats(all_runs: pd.DataFrame, model: str = PAPER_TABLE3_MODEL,
                   configurations: Iterable[tuple[str, int, float]]
                   = tuple(PAPER_TABLE3_CONFIGS), tdp: str = "paper") -> pd.DataFrame:
    """Tokens per kWh (TDP model) of every repeat of the Table 3 configurations, so a table
    that shows one repeat can say what the others give. ``all_runs``: every run (repeats
    included). Columns: ``hardware``, ``repeat_index``, ``tdp_tok_per_kwh``."""
    picked = add_tdp_energy(pick_configurations(all_runs, model, configurations), tdp)
    return picked[["hardware", "request_rate_qps", "repeat_index", "tdp_tok_per_kwh"]]


def run_summaries(paths: Iterable[str | Path]) -> list[Path]:
    """``summary.json`` of every hgresearch run folder named in ``paths`` (a run folder itself
    or a folder holding run folders), for :func:`hgresearch.data.ingest.read_runs`. Naming the
    summaries keeps a run folder's ``requests.jsonl`` from being read as a result file."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_file():
            found.append(path)
        else:
            found.extend(run_dir / SUMMARY_FILE for run_dir in find_run_dirs([path]))
    return found
