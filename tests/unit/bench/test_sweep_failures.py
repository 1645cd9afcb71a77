"""A sweep point where every request failed is recorded as failed (not "ok") and kept.

vLLM cannot run here: the sweep's server is replaced by the local streaming test double
(:mod:`hgresearch.bench.server.mock`) answering every request with HTTP 500.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hgresearch.bench.server.mock import MockServerConfig, serve_in_thread
from hgresearch.bench.sweep import local as sweep_local
from hgresearch.bench.sweep import parse_sweep, run_sweep

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class _TestDoubleServer:
    """Stands in for :class:`hgresearch.bench.server.vllm.VLLMServer` (same context protocol)."""

    def __init__(self, config, server_dir: Path) -> None:
        self.log_path = Path(server_dir) / "server.log"
        self.ready_after_s = 0.0
        self._serving = serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1, error_rate=1.0))

    def __enter__(self) -> _TestDoubleServer:
        self.base_url = self._serving.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._serving.__exit__(*exc)

    def alive(self) -> bool:
        return True

    def info(self) -> dict:
        return {"base_url": self.base_url}


def test_point_where_every_request_failed_is_a_failed_run(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_local, "VLLMServer", _TestDoubleServer)
    model = tmp_path / "model"
    model.mkdir()
    spec = {"name": "t", "out_dir": str(tmp_path / "out"), "qps": [50, 20], "warmup_requests": 0,
            "bench": {"num_prompts": 3, "telemetry": False, "idle_baseline_s": 0.0,
                      "bootstrap_reps": 0,
                      "workload": {"kind": "random", "input_len": 4, "output_len": 2}},
            "servers": [{"server": {"model": str(model), "port": 9}, "label": "a"}]}
    messages: list[str] = []
    statuses = run_sweep(parse_sweep(spec), echo=messages.append)
    assert [s["status"] for s in statuses] == ["failed", "failed"]  # the sweep went on
    assert statuses[0]["error"] == "all 3 requests failed (3 http_error)"
    assert statuses[0]["completed"] == 0
    run_dir = Path(statuses[0]["run_dir"])
    assert json.loads((run_dir / "summary.json").read_text())["failed"] == 3  # kept
