"""The run loop end to end against the local streaming test server.

The server (:mod:`hgresearch.bench.server.mock`) is a test double for vLLM: no GPU or model
exists here. It streams tokens with known delays and injects the faults a real server shows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fake_nvml import CONSTANT_TRACE, FakeNVML

from hgresearch.bench import telemetry
from hgresearch.bench.config import BenchConfig
from hgresearch.bench.options import OptionError
from hgresearch.bench.run_summary import summarize_run_dir
from hgresearch.bench.runner import run_benchmark, run_qps_sweep
from hgresearch.bench.server.mock import MockServerConfig, serve_in_subprocess, serve_in_thread
from hgresearch.data.ingest import RUN_COLUMNS, read_runs
from hgresearch.data.runfolder import read_records
from hgresearch.paths import REPO_ROOT

pytestmark = pytest.mark.filterwarnings("ignore:telemetry unavailable")


def _config(url: str, **kw) -> BenchConfig:
    base = dict(base_url=url, model="test-model", request_rate_qps=200.0, num_prompts=40,
                workload={"kind": "random", "input_len": 8, "output_len": 6},
                timeout_s=5.0, idle_baseline_s=0.0, bootstrap_reps=50, telemetry=False)
    base.update(kw)
    return BenchConfig(**base)


@pytest.mark.parametrize("http_client", ["fast", "aiohttp"])
def test_every_request_is_accounted_for_under_20_percent_faults(tmp_path, http_client):
    faults = MockServerConfig(ttft_ms=5, itl_ms=1, error_rate=0.04, hang_rate=0.04,
                              disconnect_rate=0.03, malformed_rate=0.03, truncate_rate=0.03,
                              short_rate=0.03, hang_s=3.0, seed=2)
    with serve_in_thread(faults) as url:
        s = run_benchmark(_config(url, num_prompts=150, timeout_s=0.4, request_rate_qps=400,
                                  http_client=http_client), tmp_path, progress=False)
    assert s["sent"] == 150 and s["completed"] + s["failed"] == 150
    assert 15 <= s["failed"] <= 50  # about 20%
    assert set(s["errors"]) == {"http_error", "timeout", "connection_dropped",
                                "malformed_stream", "stream_truncated", "short_output"}
    assert sum(s["errors"].values()) == s["failed"]
    records = [r for r in read_records(tmp_path / "requests.jsonl") if not r["warmup"]]
    assert sorted(r["index"] for r in records) == list(range(150))
    for r in records:
        assert r["success"] == (r["error_class"] is None)
        if r["error_class"] == "http_error":
            assert r["http_status"] == 500
    assert s["request_throughput"] == pytest.approx(s["completed"] / s["duration"])


@pytest.mark.timing
def test_several_tokens_per_event_are_counted_from_usage(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=5, itl_ms=2, tokens_per_event=3)) as url:
        s = run_benchmark(_config(url, workload={"kind": "random", "input_len": 8,
                                                 "output_len": 10}, num_prompts=10),
                          tmp_path / "cont", progress=False)
        s2 = run_benchmark(_config(url, workload={"kind": "random", "input_len": 8,
                                                  "output_len": 10}, num_prompts=10,
                                   continuous_usage=False), tmp_path / "final", progress=False)
    rec = read_records(tmp_path / "cont" / "requests.jsonl")[-1]
    assert rec["event_tokens"] == [3, 3, 3, 1] and rec["output_tokens"] == 10
    assert rec["usage_source"] == "server" and rec["prompt_tokens"] == 8
    assert s["completed"] == 10 and s["total_output_tokens"] == 100
    # ITL per streamed gap (~2 ms) vs per token (gap / tokens it brought).
    assert s["median_itl_ms"] == pytest.approx(2.0, abs=1.5)
    assert s["mean_itl_per_tok_ms"] < s["mean_itl_ms"]
    # Without continuous usage each event counts one token, but the final usage is the truth.
    rec2 = read_records(tmp_path / "final" / "requests.jsonl")[-1]
    assert rec2["event_tokens"] == [1, 1, 1, 1] and rec2["output_tokens"] == 10
    assert s2["total_output_tokens"] == 100


def test_chat_endpoint(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=3, itl_ms=1)) as url:
        s = run_benchmark(_config(url, endpoint="chat", num_prompts=5), tmp_path,
                          progress=False)
    assert s["completed"] == 5 and s["backend"] == "openai-chat"
    assert s["total_output_tokens"] == 30


def test_summary_is_read_by_the_runs_table_ingest(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=4, itl_ms=1)) as url:
        s = run_benchmark(_config(url, gpu_name="RTX 4090", gpu_count=2, replicas=1,
                                  request_rate_qps=100.0, price_usd_per_gpu_h=0.3),
                          tmp_path / "run", progress=False)
    runs = read_runs(tmp_path)
    assert list(runs.columns) == RUN_COLUMNS and len(runs) == 1
    row = runs.iloc[0]
    assert row.source_format == "hgresearch"
    assert row.gpu_name == "RTX-4090" and row.gpu_count == 2 and row.hardware == "2x RTX-4090"
    assert row.request_rate_qps == 100.0 and row.num_prompts == 40
    assert row.completed == 40 and row.failed == 0
    assert row.total_output_tok == s["total_output_tokens"] == 240
    assert row.mean_ttft_ms == pytest.approx(s["mean_ttft_ms"])
    assert row.p99_itl_ms == pytest.approx(s["p99_itl_ms"])
    assert row.output_throughput_tok_per_s == pytest.approx(s["output_throughput"])
    assert math.isnan(row.energy_j) and row.energy_source is None  # no NVML: missing
    assert Path(row.run_dir) == tmp_path / "run"
    assert bool(row.client_limited) == s["client_limited"]


@pytest.mark.parametrize("http_client", ["fast", "aiohttp"])
def test_api_key_never_appears_in_any_written_file(tmp_path, monkeypatch, http_client):
    """The server requires the key and echoes it in error bodies (worst case)."""
    key = "sk-test-9f8e7d6c5b4a39281706"
    monkeypatch.setenv("HG_TEST_API_KEY", key)
    cfg = MockServerConfig(ttft_ms=3, itl_ms=1, api_key=key, echo_auth=True, error_rate=0.3)
    with serve_in_thread(cfg) as url:
        s = run_benchmark(_config(url, api_key_env="HG_TEST_API_KEY", num_prompts=30,
                                  http_client=http_client), tmp_path, progress=False)
    assert s["completed"] > 0  # the key was sent (the server rejects requests without it)
    errors = [r["error"] for r in read_records(tmp_path / "requests.jsonl")
              if r["error_class"] == "http_error"]
    assert errors and all("***" in e for e in errors)  # the echo was scrubbed
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"config.json", "requests.jsonl", "summary.json"}
    for path in files:
        assert key.encode() not in path.read_bytes(), path


def test_existing_records_need_resume_and_resume_keeps_the_request_set(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=2, itl_ms=1)) as url:
        cfg = _config(url, num_prompts=5)
        run_benchmark(cfg, tmp_path, progress=False)
        with pytest.raises(FileExistsError, match="resume"):
            run_benchmark(cfg, tmp_path, progress=False)
        with pytest.raises(ValueError, match="seed"):
            run_benchmark(_config(url, num_prompts=5, seed=9), tmp_path, resume=True,
                          progress=False)
        before = (tmp_path / "requests.jsonl").read_bytes()
        s = run_benchmark(cfg, tmp_path, resume=True, progress=False)  # nothing left to send
    assert (tmp_path / "requests.jsonl").read_bytes() == before
    assert s["completed"] == 5


def test_qps_sweep_writes_one_folder_per_rate_and_resume_skips_finished(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=2, itl_ms=1)) as url:
        cfg = _config(url, num_prompts=8)
        out = run_qps_sweep(cfg, [50, math.inf], tmp_path, progress=False)
        assert [s["request_rate"] for s in out] == [50.0, "inf"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["qps50", "qpsinf"]
        sizes = {p: p.stat().st_size for p in tmp_path.rglob("requests.jsonl")}
        again = run_qps_sweep(cfg, [50, math.inf], tmp_path, resume=True, progress=False)
    assert again == out
    assert {p: p.stat().st_size for p in tmp_path.rglob("requests.jsonl")} == sizes


def test_measured_energy_with_fake_nvml(tmp_path, monkeypatch):
    """Two GPUs replaying 100 W each: energy = 200 W x the run windows, idle 200 W."""
    fake = FakeNVML([CONSTANT_TRACE, CONSTANT_TRACE], ["NVIDIA H100 PCIe"] * 2)
    monkeypatch.setattr(telemetry, "_import_nvml", lambda: fake)
    with serve_in_thread(MockServerConfig(ttft_ms=5, itl_ms=2)) as url:
        s = run_benchmark(_config(url, telemetry=True, telemetry_hz=50, idle_baseline_s=0.3,
                                  request_rate_qps=100.0, warmup_requests=6), tmp_path,
                          progress=False)
    assert s["gpu_name"] == "H100-PCIe" and s["gpu_count"] == 2
    assert s["telemetry_available"] is True
    assert s["energy_source"] == "nvml_energy_counter"
    window_s = (s["run_end_ns"] - s["run_start_ns"]) / 1e9
    assert s["energy_j"] == pytest.approx(200.0 * window_s, rel=0.02)
    assert s["idle_power_w"] == pytest.approx(200.0)
    steady_s = (s["steady_end_ns"] - s["steady_start_ns"]) / 1e9
    assert s["energy_steady_j"] == pytest.approx(200.0 * steady_s, rel=0.02)
    assert s["energy_per_output_tok_j"] == pytest.approx(s["energy_j"] / 240)
    meta = json.loads((tmp_path / "config.json").read_text())
    assert [g["name"] for g in meta["gpu_inventory"]] == ["NVIDIA H100 PCIe"] * 2
    phases = pd.read_csv(tmp_path / "telemetry.csv").phase
    assert list(dict.fromkeys(phases)) == ["idle", "warmup", "run"]  # in this order
    assert summarize_run_dir(tmp_path, write=False) == s


@pytest.mark.timing
def test_timing_matches_the_servers_realized_delays(tmp_path):
    """TTFT and ITL against the server's own send times at 50 req/s (server in its own
    process). Bounds are generous because this machine is shared; the sub-0.5 ms figures come
    from benchmarks/client_overhead.py."""
    log = tmp_path / "server_log.json"
    with serve_in_subprocess(MockServerConfig(ttft_ms=20, itl_ms=5, event_log=str(log))) as url:
        s = run_benchmark(_config(url, request_rate_qps=50.0, num_prompts=100,
                                  workload={"kind": "random", "input_len": 16,
                                            "output_len": 8}, warmup_requests=0),
                          tmp_path / "run", progress=False)
    realized = json.loads(log.read_text())
    server_ttft = np.median([(ev[0] - t0) / 1e6 for t0, ev in realized])
    server_itl = np.median(np.concatenate([np.diff(ev) / 1e6 for _, ev in realized]))
    assert s["completed"] == 100
    assert abs(s["median_ttft_ms"] - server_ttft) < 2.0
    assert abs(s["median_itl_ms"] - server_itl) < 1.0
    assert s["schedule_lag_p50_ms"] < 1.0


@pytest.mark.parametrize("field,value,option", [
    ("endpoint", "embeddings", "--endpoint"), ("http_client", "curl", "--http-client"),
    ("arrival", "poisson-ish", "--arrival"), ("num_prompts", 0, "--num-prompts"),
    ("base_url", "localhost:8000", "--base-url"), ("timeout_s", 0.0, "--timeout-s"),
    ("timeout_s", math.inf, "--timeout-s"), ("request_rate_qps", -1.0, "--qps"),
    ("warmup_requests", -1, "--warmup"), ("burstiness", 0.0, "--burstiness"),
    ("max_concurrency", 0, "--max-concurrency"), ("seed", -1, "--seed"),
    ("workload", {"kind": "random", "input_len": -5}, "--workload"),
    ("workload", {"kind": "random", "output_len": 0}, "--workload"),
    ("workload", {"kind": "sharegpt", "path": "/no/such/file.json"}, "--workload"),
    ("goodput_slo_ms", {"ttft": -1}, "--goodput"), ("tokenizer", "/no/such/tok", "--tokenizer"),
    ("replicas", 0, "--replicas"), ("tensor_parallel_size", 0, "--tp"),
    ("idle_baseline_s", -1.0, "--idle-baseline-s"), ("telemetry_hz", 0.0, "--telemetry-hz"),
])
def test_bad_parameters_fail_before_writing(tmp_path, field, value, option):
    cfg = _config("http://127.0.0.1:9", **{field: value})
    with pytest.raises(OptionError) as err:
        run_benchmark(cfg, tmp_path / "run", progress=False)
    assert str(err.value).startswith(option + ": ") and err.value.field == field
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()
    # A sweep checks every point before the first starts (the rate is the sweep's own).
    with pytest.raises(OptionError):
        run_qps_sweep(cfg, [1.0, value if field == "request_rate_qps" else 2.0],
                      tmp_path / "sweep", progress=False)
    assert not (tmp_path / "sweep").exists()


@pytest.mark.timing
def test_concurrency_cap_is_respected_and_its_wait_is_not_schedule_lag(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=20, itl_ms=2)) as url:
        s = run_benchmark(_config(url, request_rate_qps=math.inf, num_prompts=12,
                                  max_concurrency=3), tmp_path, progress=False)
    records = [r for r in read_records(tmp_path / "requests.jsonl") if not r["warmup"]]
    events = sorted([(r["t_sent_ns"], 1) for r in records] + [(r["t_done_ns"], -1)
                                                             for r in records])
    in_flight = np.cumsum([d for _, d in events])
    assert in_flight.max() == 3
    assert max(r["cap_wait_ns"] for r in records) > 20e6  # later requests waited for a slot
    assert s["completed"] == 12 and s["schedule_lag_p99_ms"] < 20
    assert s["p99_ttft_from_scheduled_ms"] > s["p99_ttft_ms"] + 20  # queueing included


def test_unreachable_server_stops_early_and_leaves_a_restartable_folder(tmp_path):
    from hgresearch.bench.preflight import ServerUnreachable

    with socket_closed_port() as port:
        cfg = _config(f"http://127.0.0.1:{port}", num_prompts=5, timeout_s=2.0)
        with pytest.raises(ServerUnreachable, match="no server answers"):
            run_benchmark(cfg, tmp_path, progress=False)
        with pytest.raises(ServerUnreachable):  # no "already holds records" on a retry
            run_benchmark(cfg, tmp_path, progress=False)


class socket_closed_port:  # noqa: N801 - used as a context manager
    """A local port nothing listens on."""

    def __enter__(self) -> int:
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        return self.port

    def __exit__(self, *exc) -> None:
        return None


@pytest.mark.parametrize("point", ["qps1-rep0", "qps32-rep1"])
def test_committed_summary_is_re_derived_byte_for_byte(point):
    """summary.json is derived from the run folder's other files alone: the committed CPU
    sweep's summaries come out of summarize_run_dir unchanged."""
    run_dir = (REPO_ROOT / "data" / "raw" / "cpu-tiny"
               / "tiny-llama-cpu" / "1xCPU" / point)
    derived = json.dumps(summarize_run_dir(run_dir, write=False), indent=1) + "\n"
    assert derived == (run_dir / "summary.json").read_text(encoding="utf-8")
