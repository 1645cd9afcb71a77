"""The live benchmark against several endpoints behind a routing policy.

Two local test servers (:mod:`hgresearch.bench.server.mock`, test doubles for vLLM: no model
runs here) with different injected TTFT/ITL stand for a fast and a slow replica.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hgresearch.bench.config import BenchConfig
from hgresearch.bench.options import OptionError
from hgresearch.bench.runner import run_benchmark
from hgresearch.bench.server.mock import MockServerConfig, serve_in_thread
from hgresearch.data.runfolder import read_records, read_requests, read_summary

pytestmark = [pytest.mark.filterwarnings("ignore:telemetry unavailable"),
              # The shared 2-core machine may delay a send by a few ms; the test counts
              # requests and routing, not timing.
              pytest.mark.filterwarnings("ignore:.*client-limited")]

FAST = MockServerConfig(ttft_ms=3, itl_ms=1)
SLOW = MockServerConfig(ttft_ms=40, itl_ms=10)


def _config(urls: list[str], policy: str = "jsq", **kw) -> BenchConfig:
    base = dict(base_url=urls[0], fleet=[{"base_url": u} for u in urls], policy=policy,
                model="test-model", request_rate_qps=80.0, num_prompts=60,
                workload={"kind": "random", "input_len": 8, "output_len": 6}, timeout_s=5.0,
                idle_baseline_s=0.0, bootstrap_reps=0, telemetry=False)
    base.update(kw)
    return BenchConfig(**base)


def test_two_endpoints_under_two_policies(tmp_path: Path) -> None:
    with serve_in_thread(FAST) as fast, serve_in_thread(SLOW) as slow:
        by_policy = {policy: run_benchmark(_config([fast, slow], policy), tmp_path / policy,
                                           progress=False)
                     for policy in ("round-robin", "jsq")}
    for policy, summary in by_policy.items():
        run_dir = tmp_path / policy
        records = read_records(run_dir / "requests.jsonl")
        measured = [r for r in records if not r["warmup"]]
        # Every request accounted for, once, and each names the endpoint that served it.
        assert sorted(r["index"] for r in measured) == list(range(60))
        assert all(r["success"] for r in measured)
        assert {r["endpoint"] for r in measured} <= {fast, slow}
        assert {r["endpoint"] for r in records if r["warmup"]} == {fast, slow}  # both warmed
        table = read_requests(run_dir)
        assert table.endpoint.notna().all()
        endpoints = summary["endpoints"]
        assert set(endpoints) == {fast, slow}
        assert endpoints[fast]["completed"] + endpoints[slow]["completed"] == 60
        assert endpoints[fast]["p50_ttft_ms"] < endpoints[slow]["p50_ttft_ms"]
        assert summary["policy"] == policy
        assert read_summary(run_dir)["endpoints"][slow]["sent"] == endpoints[slow]["sent"]
    rr, jsq = by_policy["round-robin"]["endpoints"], by_policy["jsq"]["endpoints"]
    assert rr[fast]["sent"] == rr[slow]["sent"] == 30
    assert jsq[fast]["sent"] > 40  # JSQ sends more to the faster server


def test_single_endpoint_records_have_no_endpoint_field(tmp_path: Path) -> None:
    with serve_in_thread(FAST) as url:
        summary = run_benchmark(_config([url], "jsq", fleet=None, num_prompts=5), tmp_path,
                                progress=False)
    assert "endpoints" not in summary
    assert all("endpoint" not in r for r in read_records(tmp_path / "requests.jsonl"))


def test_fleet_options_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    for bad, match in ((dict(policy="fastest"), "--policy"),
                       (dict(fleet=[{"base_url": "http://a:1"}, {"base_url": "http://a:1"}]),
                        "given twice"),
                       (dict(fleet=[{"base_url": "http://a:1", "capacity_weight": 0}]),
                        "capacity_weight")):
        with pytest.raises(OptionError, match=match):
            run_benchmark(_config(["http://a:1"], **{"policy": "jsq", **bad}),
                          tmp_path / "x", progress=False)
    assert not (tmp_path / "x").exists()


def test_cli_bench_fleet_file(tmp_path: Path) -> None:
    from hgresearch.cli import app

    with serve_in_thread(FAST) as fast, serve_in_thread(SLOW) as slow:
        fleet = tmp_path / "fleet.yaml"
        fleet.write_text(f"""\
replicas:
  - config: tiny-llama-cpu on 1x CPU
    base_url: {fast}
    served_model: test-model
  - config: big-cpu on 1x CPU
    base_url: {slow}
""")
        result = CliRunner().invoke(app, [
            "bench", "--fleet", str(fleet), "--policy", "least-tokens", "--model", "test-model",
            "--qps", "50", "--num-prompts", "20", "--workload",
            "random:input_len=8,output_len=4", "--no-telemetry", "--idle-baseline-s", "0",
            "--no-progress", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "tiny-llama-cpu on 1x CPU (" in result.stdout and "big-cpu on 1x CPU (" in result.stdout
    summary = read_summary(tmp_path / "out" / "qps50")
    assert sum(e["sent"] for e in summary["endpoints"].values()) == 20
    fleet.write_text("replicas:\n  - config: tiny-llama-cpu on 1x CPU\n")
    bad = CliRunner().invoke(app, ["bench", "--fleet", str(fleet), "--no-progress",
                                   "-o", str(tmp_path / "bad")])
    assert bad.exit_code == 2
    assert f"{fleet}:2, field 'base_url'" in bad.output
