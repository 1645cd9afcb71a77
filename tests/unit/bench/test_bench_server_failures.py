"""A server that cannot work stops the run early, says what it answered and what to change.

The server is the local streaming test double (:mod:`hgresearch.bench.server.mock`), which can
answer like a misconfigured vLLM (401 for a wrong key, 404 for an unknown model or route) or
accept connections and never answer; no vLLM exists here.
"""

from __future__ import annotations

import json
import time

import pytest

from hgresearch.bench.config import BenchConfig
from hgresearch.bench.preflight import (
    PointsFailed,
    ServerUnreachable,
    ServerUnusable,
    preflight,
    raise_for_failed_points,
)
from hgresearch.bench.runner import run_benchmark, run_qps_sweep
from hgresearch.bench.server.mock import MockServerConfig, serve_in_thread
from hgresearch.data.runfolder import read_records
from hgresearch.errors import InputError

pytestmark = pytest.mark.filterwarnings("ignore:telemetry unavailable")


def _config(url: str, **kw) -> BenchConfig:
    base = dict(base_url=url, model="test-model", request_rate_qps=200.0, num_prompts=6,
                workload={"kind": "random", "input_len": 8, "output_len": 4},
                timeout_s=5.0, idle_baseline_s=0.0, bootstrap_reps=0, telemetry=False)
    base.update(kw)
    return BenchConfig(**base)


def _no_request_was_measured(run_dir) -> None:
    assert not (run_dir / "summary.json").exists()
    assert all(r["warmup"] for r in read_records(run_dir / "requests.jsonl"))


def test_wrong_model_stops_after_the_warmup_and_names_the_served_model(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1, strict_model=True)) as url:
        with pytest.raises(ServerUnusable) as err:
            run_qps_sweep(_config(url, model="llama"), [50, 20], tmp_path, progress=False)
    message = str(err.value)
    assert "warm-up" in message and "HTTP 404" in message and "does not exist" in message
    assert "pass --model test-model" in message and "\n" not in message
    assert isinstance(err.value, InputError)  # the command line exits with code 2
    _no_request_was_measured(tmp_path / "qps50")
    assert not (tmp_path / "qps20").exists()  # the sweep stopped at its first point


def test_base_url_ending_in_v1_says_to_drop_it(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1)) as url:
        with pytest.raises(ServerUnusable, match="drop the trailing /v1 from --base-url"):
            run_benchmark(_config(url + "/v1"), tmp_path, progress=False)
    _no_request_was_measured(tmp_path)


@pytest.mark.parametrize("key,expected", [("wrong-key", "refused the API key in $HG_TEST_KEY"),
                                          ("", "wants an API key")])
def test_bad_or_missing_api_key_says_so(tmp_path, monkeypatch, key, expected):
    monkeypatch.setenv("HG_TEST_KEY", key)
    cfg = MockServerConfig(ttft_ms=1, itl_ms=1, api_key="sk-right")
    with serve_in_thread(cfg) as url:
        with pytest.raises(ServerUnusable) as err:
            run_benchmark(_config(url, api_key_env="HG_TEST_KEY"), tmp_path, progress=False)
    assert "HTTP 401" in str(err.value) and expected in str(err.value)


def test_failed_warmup_of_any_kind_stops_before_measuring(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1, error_rate=1.0)) as url:
        with pytest.raises(ServerUnusable, match="HTTP 500"):
            run_benchmark(_config(url, warmup_requests=2), tmp_path, progress=False)
    _no_request_was_measured(tmp_path)


@pytest.mark.timing
def test_silent_server_fails_within_the_timeout_and_says_it_is_waiting(tmp_path):
    lines: list[str] = []
    with serve_in_thread(MockServerConfig(silent=True)) as url:
        start = time.monotonic()
        with pytest.raises(ServerUnreachable) as err:
            preflight(_config(url, timeout_s=1.0), echo=lines.append, tick_s=0.3)
        assert time.monotonic() - start < 3.0  # /version is not asked after /v1/models
        with pytest.raises(ServerUnreachable, match="no answer within 1 s"):
            run_benchmark(_config(url, timeout_s=1.0), tmp_path / "run", progress=False)
    assert "accepted" in str(err.value) and "raise --timeout-s" in str(err.value)
    assert lines and lines[0].startswith("waiting for the server's answer to GET /v1/models")
    assert not (tmp_path / "run").exists()  # nothing written


def test_all_failed_point_is_kept_and_the_sweep_goes_on(tmp_path):
    """No warm-up to catch it: every measured request fails (HTTP 500, not a configuration
    fault), the point is recorded, the next point runs, and the result says both failed."""
    with serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1, error_rate=1.0)) as url:
        with pytest.warns(UserWarning, match="all 6 measured requests failed"):
            summaries = run_qps_sweep(_config(url, warmup_requests=0), [50, 20], tmp_path,
                                      progress=False)
    assert [s["completed"] for s in summaries] == [0, 0]
    assert all((tmp_path / d / "summary.json").exists() for d in ("qps50", "qps20"))
    with pytest.raises(PointsFailed) as err:
        raise_for_failed_points(summaries)
    assert "qps 50.0: all 6 requests failed (6 http_error)" in str(err.value)
    assert len(err.value.failed) == 2
    raise_for_failed_points([{**summaries[0], "completed": 1}])  # one success is a result


def test_all_failed_point_of_a_misconfigured_server_stops_the_sweep_and_keeps_it(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1, strict_model=True)) as url:
        with pytest.raises(ServerUnusable, match="the run folder is kept") as err:
            run_qps_sweep(_config(url, model="llama", warmup_requests=0), [50, 20], tmp_path,
                          progress=False)
    assert "pass --model test-model" in str(err.value)
    summary = json.loads((tmp_path / "qps50" / "summary.json").read_text())
    assert summary["sent"] == 6 and summary["completed"] == 0  # nothing measured is lost
    assert not (tmp_path / "qps20").exists()


def test_resume_refuses_changed_parameters_of_finished_and_unfinished_points(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1)) as url:
        cfg = _config(url)
        run_qps_sweep(cfg, [50], tmp_path, progress=False)
        changed = _config(url, seed=9, timeout_s=7.0)
        with pytest.raises(InputError) as err:  # finished: was skipped silently before
            run_qps_sweep(changed, [50], tmp_path, resume=True, progress=False)
        assert "seed (run has 0, asked 9)" in str(err.value)
        assert "timeout_s (run has 5.0, asked 7.0)" in str(err.value)
        with pytest.raises(InputError, match="seed"):  # a single point, too
            run_benchmark(changed, tmp_path / "qps50", resume=True, progress=False)
        # Where the key is read from may change.
        again = run_qps_sweep(_config(url, api_key_env="OTHER"), [50], tmp_path, resume=True,
                              progress=False)
    assert again[0]["completed"] == 6
