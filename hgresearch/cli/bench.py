"""``hgresearch bench``: run a benchmark point or QPS sweep against an OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli import app
from hgresearch.cli.errors import command
from hgresearch.cli.options import Resume, Seed, output_option


def parse_qps(text: str) -> list[float]:
    """``"32,16,8"`` -> ``[32.0, 16.0, 8.0]`` (``inf`` allowed)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise typer.BadParameter(
            f"expected comma-separated numbers or inf, got {text!r}") from None
    if not values or any(not v > 0 for v in values):
        raise typer.BadParameter(f"request rates must be > 0 (or inf), got {text!r}")
    return values


def parse_slo(text: str | None) -> dict[str, float] | None:
    """``"ttft:500,tpot:50"`` -> ``{"ttft": 500.0, "tpot": 50.0}`` (milliseconds)."""
    if not text:
        return None
    out = {}
    for item in text.split(","):
        key, _, value = item.partition(":")
        if key.strip() not in ("ttft", "tpot", "e2el") or not value:
            raise typer.BadParameter(f"expected ttft|tpot|e2el:<ms>, got {item!r}")
        out[key.strip()] = float(value)
    return out


@command(app, "bench")
def bench(
    base_url: Annotated[str, typer.Option(help="Server base URL (without /v1).")]
    = "http://127.0.0.1:8000",
    model: Annotated[str, typer.Option(help="Served model name.")] = "model",
    qps: Annotated[str, typer.Option(help="Request rates (req/s), comma-separated; inf "
                                     "sends all at once. Default: the paper's sweep.")]
    = "32,16,8,4,1",
    num_prompts: Annotated[int, typer.Option(help="Measured requests per point.")] = 100,
    workload: Annotated[str, typer.Option(help=(
        "Workload spec kind:key=value,...: 'random:input_len=1024,output_len=128,"
        "range_ratio=1.0', 'sharegpt:path=FILE', 'jsonl:path=FILE', or a JSON object, e.g. "
        "'{\"kind\":\"synthetic\",\"input\":{\"dist\":\"lognormal\",\"median\":300,"
        "\"sigma\":0.8},\"output\":{\"dist\":\"constant\",\"value\":128}}'."))]
    = "random:input_len=1024,output_len=128",
    dataset: Annotated[str | None, typer.Option(help="Dataset label in the summary.")] = None,
    endpoint: Annotated[str, typer.Option(help="completions or chat.")] = "completions",
    seed: Seed = 0,
    burstiness: Annotated[float, typer.Option(help="Gamma shape; 1 = Poisson.")] = 1.0,
    arrival: Annotated[str, typer.Option(help="gamma or constant.")] = "gamma",
    max_concurrency: Annotated[int | None, typer.Option(help="Cap on requests in flight.")]
    = None,
    warmup: Annotated[int, typer.Option(help="Warm-up requests (not measured).")] = 1,
    tokenizer: Annotated[str | None, typer.Option(help="Local tokenizer path.")] = None,
    timeout_s: Annotated[float, typer.Option(help="Per-request timeout (s).")] = 600.0,
    api_key_env: Annotated[str, typer.Option(help="Environment variable holding the API key "
                                             "(the key is never written).")]
    = "OPENAI_API_KEY",
    gpu_name: Annotated[str | None, typer.Option(help="Hardware label (e.g. H100-PCIe, "
                                                 "RTX-4090); default from NVML, else CPU.")]
    = None,
    gpu_count: Annotated[int | None, typer.Option(help="GPU count override.")] = None,
    tensor_parallel_size: Annotated[int | None, typer.Option("--tp", help="Tensor-parallel "
                                                             "size (default: GPU count).")]
    = None,
    replicas: Annotated[int, typer.Option(help="Server replicas behind the URL.")] = 1,
    price_usd_per_gpu_h: Annotated[float | None, typer.Option(help="Price per GPU-hour.")]
    = None,
    goodput: Annotated[str | None, typer.Option(help="SLOs in ms, e.g. ttft:500,tpot:50.")]
    = None,
    telemetry: Annotated[bool, typer.Option(help="Sample NVML (if present).")] = True,
    idle_baseline_s: Annotated[float, typer.Option(help="Idle power baseline before each "
                                                   "point (s).")] = 5.0,
    http_client: Annotated[str, typer.Option(help="fast (protocol-level, default) or aiohttp.")]
    = "fast",
    output: Annotated[Path, output_option("Sweep folder; each rate gets qps<rate>/.")]
    = Path("runs/bench"),
    resume: Resume = False,
    progress: Annotated[bool, typer.Option(help="Live progress bar.")] = True,
) -> None:
    """Benchmark a server at each request rate; writes one run folder per rate."""
    from hgresearch.bench.runner import BenchConfig, run_qps_sweep
    from hgresearch.bench.workloads import parse_workload

    spec = parse_workload(workload)
    config = BenchConfig(
        base_url=base_url, model=model, endpoint=endpoint, num_prompts=num_prompts,
        burstiness=burstiness, arrival=arrival, max_concurrency=max_concurrency,
        warmup_requests=warmup, workload=spec, dataset=dataset, seed=seed,
        tokenizer=tokenizer, timeout_s=timeout_s, api_key_env=api_key_env,
        gpu_name=gpu_name, gpu_count=gpu_count, tensor_parallel_size=tensor_parallel_size,
        replicas=replicas, price_usd_per_gpu_h=price_usd_per_gpu_h, telemetry=telemetry,
        idle_baseline_s=idle_baseline_s, goodput_slo_ms=parse_slo(goodput),
        http_client=http_client)
    summaries = run_qps_sweep(config, parse_qps(qps), output, resume=resume, progress=progress)
    for s in summaries:
        ttft = s.get("median_ttft_ms")
        typer.echo(
            f"qps {s['request_rate']}: {s['completed']}/{s['sent']} ok, {s['failed']} failed, "
            f"{s['request_throughput'] or 0:.2f} req/s, {s['output_throughput'] or 0:.1f} tok/s"
            f", median TTFT {ttft if ttft is None else round(ttft, 2)} ms, lag p99 "
            f"{s['schedule_lag_p99_ms']:.2f} ms" + (" [client-limited]"
                                                  if s["client_limited"] else ""))
    typer.echo(f"run folders in {output}")
