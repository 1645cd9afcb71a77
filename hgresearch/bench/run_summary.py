"""A run folder's ``summary.json``, derived from its other files only (``config.json``,
``requests.jsonl``, ``telemetry.csv``), so it can be recomputed offline at any time
(:func:`summarize_run_dir`). Its keys come in vLLM's result-file order, followed by ours
(docs/measurement.md, ``summary.json``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hgresearch.bench.config import BenchConfig, fleet_endpoints, rate_json
from hgresearch.data.runfolder import read_config, read_requests, read_telemetry, write_summary

if TYPE_CHECKING:
    import pandas as pd


def summarize_run_dir(run_dir: Path, *, write: bool = True) -> dict[str, Any]:
    """The run's summary, derived from ``config.json``, ``requests.jsonl`` and
    ``telemetry.csv`` only (so it can be recomputed offline); written to summary.json.

    Steps: read the point's configuration, compute the request metrics
    (:func:`hgresearch.data.summary.summarize`), find each segment's measured window, integrate
    telemetry over them (:func:`_energy_fields`), then lay the keys out as vLLM's result files
    do, followed by ours (docs/measurement.md, ``summary.json``).
    """
    from hgresearch.data.summary import summarize

    run_dir = Path(run_dir)
    meta = read_config(run_dir)
    cfg = BenchConfig.from_json(meta["config"])
    table = read_requests(run_dir)
    metrics = summarize(table, goodput_slo_ms=cfg.goodput_slo_ms,
                        steady_fraction=cfg.steady_fraction,
                        bootstrap_reps=cfg.bootstrap_reps, bootstrap_seed=cfg.seed)
    windows = _segment_windows_ns(table)
    energy = _energy_fields(read_telemetry(run_dir), windows, metrics)
    summary: dict[str, Any] = {
        **_point_fields(cfg, meta),
        **metrics,
        **_provenance_fields(cfg, meta),
        "telemetry_available": (bool(meta.get("telemetry_available"))
                                and energy["energy_j"] is not None),
        **energy,
        "run_start_ns": windows[0][0] if windows else None,
        "run_end_ns": windows[-1][1] if windows else None,
        "segments": len(windows),
        "client_cpu_s": _sum_or_none([seg.get("client_cpu_s")
                                      for seg in meta.get("segments", [])]),
        **_energy_per_token(energy["energy_j"], metrics),
    }
    if cfg.fleet:
        summary["policy"] = cfg.policy
        summary["endpoints"] = _endpoint_summaries(cfg, table)
    if write:
        write_summary(run_dir, summary)
    return summary


def _endpoint_summaries(cfg: BenchConfig, table: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per endpoint of a multi-endpoint run (by base URL): its label, model, capacity weight
    and the metrics of the requests it served (:func:`hgresearch.data.summary.summarize_by`)."""
    from hgresearch.data.summary import summarize_by

    by_url = summarize_by(table, "endpoint", goodput_slo_ms=cfg.goodput_slo_ms,
                          steady_fraction=cfg.steady_fraction)
    out = {}
    for e in fleet_endpoints(cfg):
        metrics = by_url.get(e["base_url"])
        out[e["base_url"]] = {"name": e["name"], "model": e["model"],
                              "capacity_weight": e["capacity_weight"],
                              "price_usd_per_h": e["price_usd_per_h"],
                              **(metrics or {"sent": 0, "completed": 0})}
    return out


def _segment_windows_ns(table: pd.DataFrame) -> list[tuple[int, int]]:
    """Per segment (start or resume) of the measured requests: its clock start to its last
    request's end (``time.monotonic_ns()``), in segment order."""
    measured = table[~table.warmup] if len(table) else table
    return [(int(seg.segment_start_ns.min()), int(seg.t_done_ns.max()))
            for _, seg in measured.groupby("segment", sort=True)]


def _point_fields(cfg: BenchConfig, meta: dict[str, Any]) -> dict[str, Any]:
    """The keys vLLM's result files start with: what was run, where, at which rate."""
    return {
        "date": meta["date"],
        "backend": cfg.backend or ("openai-chat" if cfg.endpoint == "chat" else "vllm"),
        "model_id": cfg.model,
        "tokenizer_id": cfg.tokenizer or cfg.model,
        "num_prompts": cfg.num_prompts,
        "gpu_name": meta["gpu_name"],
        "gpu_count": meta["gpu_count"],
        "request_rate": rate_json(cfg.request_rate_qps),
        "burstiness": cfg.burstiness,
        "max_concurrency": cfg.max_concurrency,
    }


def _provenance_fields(cfg: BenchConfig, meta: dict[str, Any]) -> dict[str, Any]:
    """Our keys after the metrics: code version, dataset label, parallelism, price."""
    return {
        "hgresearch_version": meta["hgresearch_version"],
        "git_commit": meta.get("git_commit"),
        "dataset": cfg.dataset or str(cfg.workload.get("kind")),
        "tensor_parallel_size": cfg.tensor_parallel_size or meta["gpu_count"],
        "replicas": cfg.replicas,
        "price_usd_per_gpu_h": cfg.price_usd_per_gpu_h,
    }


def _energy_fields(telemetry: pd.DataFrame, windows: list[tuple[int, int]],
                   metrics: dict[str, Any]) -> dict[str, Any]:
    """Energy over the measured windows and over the steady window, and the idle baseline
    (None where telemetry cannot give them, never 0)."""
    from hgresearch.accounting.energy import energy_over_windows, idle_power_w

    # The same integer nanoseconds, typed as the accounting side takes them (no conversion:
    # a float would round monotonic-clock values past 2**53 ns).
    spans: list[tuple[float, float]] = [*windows]
    energy, source = energy_over_windows(telemetry, spans)
    steady = (metrics["steady_start_ns"], metrics["steady_end_ns"])
    energy_steady, _ = energy_over_windows(telemetry, [steady]) if steady[0] else (None, None)
    return {
        "energy_source": source,
        "energy_j": energy,
        "energy_steady_j": energy_steady,
        "idle_power_w": idle_power_w(telemetry) if not telemetry.empty else None,
    }


def _energy_per_token(energy_j: float | None, metrics: dict[str, Any]) -> dict[str, Any]:
    """Energy per input+output token and per output token (None without energy or tokens)."""
    total_tok = metrics["total_input_tokens"] + metrics["total_output_tokens"]
    output_tok = metrics["total_output_tokens"]
    return {
        "energy_per_tok_j": energy_j / total_tok if energy_j is not None and total_tok else None,
        "energy_per_output_tok_j": (energy_j / output_tok
                                    if energy_j is not None and output_tok else None),
    }


def _sum_or_none(values: list[float | None]) -> float | None:
    """Sum of the values, or None when any is missing (a killed segment has none)."""
    present = [v for v in values if v is not None]
    return float(sum(present)) if values and len(present) == len(values) else None
