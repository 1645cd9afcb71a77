"""Live fleet experiment on vLLM for CPU: two servers of different speed, each alone and both
behind the bench's router under several policies (the experiment file says which).

    PYTHONPATH=$PWD HGRESEARCH_VLLM_PYTHON=.venv-vllm/bin/python .venv/bin/python \
        scripts/fleet_cpu_experiment.py sweeps/experiments/fleet-cpu.yaml [--resume]

Both servers are started once (each pinned to its own cores, see the experiment file) and stay
up for every point; for each rate the points run in the order: each server alone, then the
fleet under each policy, so that drift of the shared machine spreads over all of them. Before
each point the script waits (up to ``--max-wait-s``) for the 1-minute load average to fall
below ``--quiet-load``; the load before and after each point goes to
``<out_dir>/_experiment/status.jsonl``. Run folders: ``<out_dir>/alone-<model>/qps<R>`` and
``<out_dir>/fleet-<policy>/qps<R>``, each with the usual files (config.json names the
endpoints and the policy) plus ``server_metrics.json`` (the server's own counters around the
run; for a fleet run one entry per endpoint).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from hgresearch.bench.config import BenchConfig
from hgresearch.bench.dummy_model import synth_model
from hgresearch.bench.runner import run_benchmark
from hgresearch.bench.server.process import sigterm_as_exit
from hgresearch.bench.server.prometheus import cross_check, scrape
from hgresearch.bench.server.vllm import VLLMServer, VLLMServerConfig, warm_up
from hgresearch.bench.sweep import qps_label
from hgresearch.data.runfolder import is_finished, write_server_metrics

REPO_ROOT = Path(__file__).resolve().parent.parent


def wait_for_quiet(threshold: float, max_wait_s: float, poll_s: float = 30.0) -> float:
    """Wait until the 1-minute load average is below ``threshold`` (at most ``max_wait_s``);
    returns the load average measured at the end of the wait."""
    waited = 0.0
    while os.getloadavg()[0] >= threshold and waited < max_wait_s:
        time.sleep(poll_s)
        waited += poll_s
    return os.getloadavg()[0]


def start_servers(spec: dict[str, Any], out_dir: Path, stack: contextlib.ExitStack
                  ) -> list[tuple[VLLMServer, Path]]:
    """Synthesize each model, start its server (one after another: start-up compiles) and warm
    it up; returns ``(server, model folder)`` pairs, stopped when ``stack`` closes."""
    started = []
    for entry in spec["servers"]:
        name = entry["synth"]
        model_dir = synth_model(name, REPO_ROOT / "build" / "models" / name)
        options = {**spec.get("server", {}), **entry.get("server", {}),
                   "model": str(model_dir.relative_to(REPO_ROOT)), "load_format": "dummy"}
        config = VLLMServerConfig.from_dict(options, where=f"servers[{name}]")
        server = VLLMServer(config, log_dir=out_dir / "_experiment" / name)
        print(f"starting {name} on port {config.port}, cores {config.cpu_affinity} ...",
              flush=True)
        stack.enter_context(server)
        warm_up(server.base_url, config.name, requests=int(spec.get("warmup_requests", 4)))
        started.append((server, model_dir))
    return started


def point_config(spec: dict[str, Any], qps: float, tokenizer: Path,
                 servers: list[VLLMServer], policy: str | None) -> BenchConfig:
    """The bench configuration of one point: one server alone (``policy`` None) or all."""
    values = {**spec["bench"], "request_rate_qps": qps, "warmup_requests": 0,
              "tokenizer": str(tokenizer.relative_to(REPO_ROOT))}
    if policy is None:
        (server,) = servers
        values.update(base_url=server.base_url, model=server.config.name)
    else:
        values.update(base_url=servers[0].base_url, model=servers[0].config.name,
                      policy=policy,
                      fleet=[{"base_url": s.base_url, "model": s.config.name,
                              "name": s.config.name} for s in servers])
    return BenchConfig(**values)


def run_point(config: BenchConfig, run_dir: Path, servers: list[VLLMServer],
              label: str) -> dict[str, Any]:
    """One point with the servers' counters scraped around it."""
    before = {s.base_url: scrape(s.base_url) for s in servers}
    info = {s.base_url: {**s.info(), "experiment_point": label} for s in servers}
    server_info = info[servers[0].base_url] if len(servers) == 1 else {"endpoints": info}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the flag is printed below
        summary = run_benchmark(config, run_dir, progress=False, server_info=server_info)
    after = {s.base_url: scrape(s.base_url) for s in servers}
    if len(servers) == 1:
        url = servers[0].base_url
        checks = cross_check(summary, before[url], after[url])
    else:
        parts = summary.get("endpoints") or {}
        checks = {"endpoints": {s.base_url: cross_check(parts.get(s.base_url, {}),
                                                        before[s.base_url], after[s.base_url])
                                for s in servers}}
    write_server_metrics(run_dir, checks)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", type=Path,
                        help="experiment file, e.g. sweeps/experiments/fleet-cpu.yaml")
    parser.add_argument("--resume", action="store_true", help="skip finished run folders")
    parser.add_argument("--quiet-load", type=float, default=1.0)
    parser.add_argument("--max-wait-s", type=float, default=600.0)
    args = parser.parse_args(argv)
    spec = yaml.safe_load(args.experiment.read_text())
    out_dir = REPO_ROOT / spec["out_dir"]
    (out_dir / "_experiment").mkdir(parents=True, exist_ok=True)
    (out_dir / "_experiment" / "experiment.yaml").write_text(args.experiment.read_text())
    status = out_dir / "_experiment" / "status.jsonl"
    with sigterm_as_exit(), contextlib.ExitStack() as stack:
        started = start_servers(spec, out_dir, stack)
        servers = [s for s, _ in started]
        tokenizer = started[0][1]  # one tokenizer for every point: identical workloads
        for qps in spec["qps"]:
            points: list[tuple[str, list[VLLMServer], str | None]] = [
                (f"alone-{s.config.name}", [s], None) for s in servers]
            points += [(f"fleet-{p}", servers, p) for p in spec["policies"]]
            for label, members, policy in points:
                run_dir = out_dir / label / f"qps{qps_label(qps)}"
                if args.resume and is_finished(run_dir):
                    continue
                if run_dir.exists():
                    raise SystemExit(f"{run_dir} exists; remove it or pass --resume")
                load_before = wait_for_quiet(args.quiet_load, args.max_wait_s)
                if not all(s.alive() for s in servers):
                    raise SystemExit("a server died; see " + ", ".join(
                        str(s.log_path) for s in servers))
                t0 = time.monotonic()
                summary = run_point(point_config(spec, qps, tokenizer, members, policy),
                                    run_dir, members, label)
                row = {"at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "point": label,
                       "qps": qps, "run_dir": str(run_dir.relative_to(REPO_ROOT)),
                       "wall_s": round(time.monotonic() - t0, 1),
                       "load1_before": round(load_before, 2),
                       "load1_after": round(os.getloadavg()[0], 2),
                       **{k: summary.get(k) for k in (
                           "completed", "failed", "request_throughput", "mean_tpot_ms",
                           "p50_ttft_ms", "p90_ttft_ms", "late_send_share",
                           "realised_rate_ratio", "client_limited")}}
                with open(status, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row, sort_keys=True) + "\n")
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
