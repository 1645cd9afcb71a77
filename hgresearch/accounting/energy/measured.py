"""Measured energy from hgresearch run folders (``summary.json`` + ``telemetry.csv`` +
``requests.jsonl``, read with :mod:`hgresearch.data.runfolder`; see docs/measurement.md).

NVML counter delta (or power integral) over the steady-state window, the idle baseline
separately, and a block-bootstrap confidence interval. Missing measurements stay NaN, never
zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.accounting.energy.tdp import (
    configuration_power_w,
    tdp_per_gpu_w,
    tokens_per_kwh_of_energy,
)
from hgresearch.data.runfolder import (
    SUMMARY_FILE,
    find_run_dirs,
    read_requests,
    read_summary,
    read_telemetry,
)
from hgresearch.data.summary import bootstrap_intervals

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
            ratio: np.ndarray = block_energy[pick].sum(axis=1) / block_tok[pick].sum(axis=1)
        return ratio

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
