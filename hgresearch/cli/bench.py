"""``hgresearch bench``: run a benchmark point or QPS sweep against an OpenAI-compatible server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hgresearch.bench.options import Arrival, Endpoint, HttpClient
from hgresearch.cli.options import AllowLarge, Resume, Seed, output_option
from hgresearch.traffic.routing import Policy


def bench(
    base_url: Annotated[list[str] | None, typer.Option(
        help="Server base URL (without /v1); repeat it for several endpoints behind a router "
             "(--policy). Default: http://127.0.0.1:8000.")] = None,
    fleet: Annotated[Path | None, typer.Option(
        help="Fleet file (YAML, docs/simulator.md): the endpoints (each replica's base_url, "
             "optional served_model, capacity_weight, max_outstanding, price).")] = None,
    policy: Annotated[Policy, typer.Option(help="Routing policy over several endpoints.")]
    = Policy.JSQ,
    threshold_tokens: Annotated[int, typer.Option(help="length-aware: prompts of at least "
                                                  "this many tokens go to the fastest "
                                                  "endpoint.")] = 1024,
    max_outstanding: Annotated[int, typer.Option(help="cost-spillover: SLO-safe outstanding "
                                                 "requests per endpoint (unless the fleet "
                                                 "file gives one).")] = 16,
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
    endpoint: Annotated[Endpoint, typer.Option(help="OpenAI API the requests go to.")]
    = Endpoint.COMPLETIONS,
    seed: Seed = 0,
    burstiness: Annotated[float, typer.Option(help="Gamma shape; 1 = Poisson.")] = 1.0,
    arrival: Annotated[Arrival, typer.Option(help="Inter-arrival times: gamma (Poisson at "
                                             "burstiness 1) or constant.")] = Arrival.GAMMA,
    max_concurrency: Annotated[int | None, typer.Option(help="Cap on requests in flight.")]
    = None,
    warmup: Annotated[int, typer.Option(help="Warm-up requests (not measured).")] = 1,
    tokenizer: Annotated[str | None, typer.Option(help="Local tokenizer path.")] = None,
    timeout_s: Annotated[float, typer.Option(help="Per-request timeout (s); the server's "
                                           "/v1/models and /version get at most 30 s of it.")]
    = 600.0,
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
    http_client: Annotated[HttpClient, typer.Option(help="HTTP engine: fast (protocol-level) "
                                                    "or aiohttp.")] = HttpClient.FAST,
    output: Annotated[Path, output_option("Sweep folder; each rate gets qps<rate>/.")]
    = Path("runs/bench"),
    resume: Resume = False,
    progress: Annotated[bool, typer.Option(help="Live progress bar.")] = True,
    allow_large: AllowLarge = False,
) -> None:
    """Benchmark a server at each request rate; writes one run folder per rate.

    Every option is checked before anything is written (a bad value: exit 2, no folder). A
    server that cannot serve this configuration (no answer, wrong --model, --base-url ending in
    /v1, API key refused, failed warm-up) stops the run after the warm-up: exit 2, with the
    server's answer and what to change. A point where every request failed for another reason
    is kept and the other points run; the exit code is then 1. Work estimated over 1 hour
    (the arrivals of every rate) or 4 GB is refused before anything is sent, without
    --allow-large.
    """
    from hgresearch.bench.config import BenchConfig
    from hgresearch.bench.options import (
        bench_estimate,
        parse_goodput,
        parse_qps,
        parse_workload_option,
    )
    from hgresearch.bench.preflight import raise_for_failed_points
    from hgresearch.bench.runner import run_qps_sweep
    from hgresearch.bounds import check_work

    rates = parse_qps(qps)
    endpoints = _endpoints(base_url, fleet, model)
    config = BenchConfig(
        base_url=endpoints[0]["base_url"] if endpoints else (base_url or [DEFAULT_URL])[0],
        fleet=endpoints or None, policy=policy.value, policy_threshold_tokens=threshold_tokens,
        policy_max_outstanding=max_outstanding, model=model, endpoint=endpoint.value,
        num_prompts=num_prompts,
        burstiness=burstiness, arrival=arrival.value, max_concurrency=max_concurrency,
        warmup_requests=warmup, workload=parse_workload_option(workload), dataset=dataset,
        seed=seed, tokenizer=tokenizer, timeout_s=timeout_s, api_key_env=api_key_env,
        gpu_name=gpu_name, gpu_count=gpu_count, tensor_parallel_size=tensor_parallel_size,
        replicas=replicas, price_usd_per_gpu_h=price_usd_per_gpu_h, telemetry=telemetry,
        idle_baseline_s=idle_baseline_s, goodput_slo_ms=parse_goodput(goodput),
        http_client=http_client.value)
    check_work(bench_estimate(config, rates), allow_large=allow_large)
    summaries = run_qps_sweep(config, rates, output, resume=resume, progress=progress)
    for s in summaries:
        ttft = s.get("median_ttft_ms")
        typer.echo(
            f"qps {s['request_rate']}: {s['completed']}/{s['sent']} ok, {s['failed']} failed, "
            f"{s['request_throughput'] or 0:.2f} req/s, {s['output_throughput'] or 0:.1f} tok/s"
            f", median TTFT {ttft if ttft is None else round(ttft, 2)} ms, lag p99 "
            f"{s['schedule_lag_p99_ms']:.2f} ms" + (" [client-limited]"
                                                  if s["client_limited"] else ""))
        for url, e in (s.get("endpoints") or {}).items():
            ttft = e.get("p99_ttft_ms")
            typer.echo(f"  {e['name']} ({url}): {e['completed']}/{e['sent']} ok, "
                       f"{e.get('request_throughput') or 0:.2f} req/s, p99 TTFT "
                       f"{ttft if ttft is None else round(ttft, 2)} ms")
    typer.echo(f"run folders in {output}")
    raise_for_failed_points(summaries)


DEFAULT_URL = "http://127.0.0.1:8000"


def _endpoints(base_urls: list[str] | None, fleet_file: Path | None,
               model: str) -> list[dict[str, Any]]:
    """The endpoints of a multi-endpoint run (empty for one server): from --fleet, or from a
    repeated --base-url."""
    from hgresearch.bench.options import OptionError

    if fleet_file is not None:
        if base_urls:
            raise OptionError("--fleet", "give the endpoints either with --fleet or with "
                                         "--base-url, not both")
        from hgresearch.sim.fleet_spec import bench_endpoints, load_fleet

        return bench_endpoints(load_fleet(fleet_file), model)
    if base_urls and len(base_urls) > 1:
        return [{"base_url": url} for url in base_urls]
    return []
