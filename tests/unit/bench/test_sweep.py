"""Sweep files: validation, run folder layout, failure recording (no vLLM needed here; the
real server runs in tests/integration/test_e2e_vllm_cpu.py)."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path

import pytest
import yaml

from hgresearch.bench.sweep import (
    apply_dummy_weights,
    bench_config,
    load_sweep,
    parse_sweep,
    qps_label,
    run_points,
    run_sweep,
)
from hgresearch.errors import InputError
from hgresearch.paths import REPO_ROOT

MINIMAL = {"name": "t", "out_dir": "out", "qps": [1, "inf"], "repeats": 2,
           "servers": [{"synth": "tiny-llama-cpu", "gpu_name": "CPU", "server": {"port": 9}}]}


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "sweeps").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_shipped_sweep_files_are_valid(path: Path) -> None:
    sweep = load_sweep(path)
    assert sweep.servers and sweep.qps
    for entry in sweep.servers:
        config = bench_config(sweep, entry, sweep.qps[0], "http://127.0.0.1:1")
        assert config.model == entry.server.name


def test_paper_sweeps_follow_the_paper_protocol() -> None:
    h100 = load_sweep(REPO_ROOT / "sweeps" / "paper-h100.yaml")
    rtx = load_sweep(REPO_ROOT / "sweeps" / "paper-rtx-4090.yaml")
    assert h100.qps == rtx.qps == [32.0, 16.0, 8.0, 4.0, 1.0]
    assert len(h100.servers) + len(rtx.servers) == 24  # the paper's 24 configurations
    assert h100.bench["num_prompts"] == 200 and h100.bench["seed"] == 42
    for entry in h100.servers + rtx.servers:
        assert entry.server.tensor_parallel_size == entry.gpu_count
        assert entry.server.dtype == "float16"
    dummy = apply_dummy_weights(h100)
    assert all(e.server.load_format == "dummy" and e.synth for e in dummy.servers)
    assert dummy.out_dir.name == "paper-h100-dummy"
    assert dummy.servers[0].server.name == "DeepSeek-R1-Distill-Qwen-1.5B"


def test_run_folders_are_named_by_model_hardware_qps_and_repeat(tmp_path: Path) -> None:
    sweep = parse_sweep(MINIMAL, base_dir=tmp_path)
    dirs = [p.run_dir.relative_to(tmp_path).as_posix() for p in run_points(sweep)]
    assert dirs == ["out/tiny-llama-cpu/1xCPU/qps1-rep0", "out/tiny-llama-cpu/1xCPU/qpsinf-rep0",
                    "out/tiny-llama-cpu/1xCPU/qps1-rep1", "out/tiny-llama-cpu/1xCPU/qpsinf-rep1"]
    assert math.isinf(sweep.qps[1]) and qps_label(0.5) == "0.5"
    entry = sweep.servers[0]
    assert entry.server.load_format == "dummy" and entry.server.name == "tiny-llama-cpu"


@pytest.mark.parametrize("change, field, bad_line", [
    ({"qps": [0]}, "qps[0]", "- 0"),
    ({"repeats": 0}, "repeats", "repeats: 0"),
    ({"duration_s": -5}, "duration_s", "duration_s: -5"),
    ({"duration_s": 60}, "qps", "qps:"),  # MINIMAL has an inf rate: no duration to fill
    ({"colour": "red"}, "colour", "colour: red"),
    ({"servers": [{"synth": "nope"}]}, "servers[0].synth", "synth: nope"),
    ({"servers": [{"server": {"model": "m", "tp": 2}}]}, "servers[0].server.tp", "tp: 2"),
    ({"server": {"tp": 2}}, "server.tp", "tp: 2"),  # in the fields every entry shares
    ({"servers": [{"server": {"model": "m"}, "gpu_name": "GTX-1"}]}, "servers[0].gpu_name",
     "gpu_name: GTX-1"),
    ({"bench": {"num_promts": 3}}, "bench.num_promts", "num_promts: 3"),
])
def test_bad_sweep_files_name_the_field_and_its_line(tmp_path: Path, change: dict, field: str,
                                                     bad_line: str) -> None:
    path = tmp_path / "bad.yaml"
    text = yaml.safe_dump({**MINIMAL, **change})
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert err.value.field == field and err.value.file == str(path)
    line = next(n for n, raw in enumerate(text.splitlines(), 1) if bad_line in raw)
    assert err.value.line == line, text
    assert str(err.value).startswith(f"{path}:{line}, field '{field}': ")


def test_malformed_or_missing_sweep_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: t\nqps: [1, 2\nservers: []\n")
    with pytest.raises(InputError, match="malformed YAML") as err:
        load_sweep(path)
    assert err.value.line is not None and err.value.file == str(path)
    with pytest.raises(InputError, match="not found"):
        load_sweep(tmp_path / "missing.yaml")


def test_duration_s_sends_rate_times_duration_requests(tmp_path: Path) -> None:
    """Sustained-load sweeps: every rate runs about as long, whatever bench.num_prompts says."""
    sweep = parse_sweep({**MINIMAL, "qps": [2, 0.5], "duration_s": 90,
                         "bench": {"num_prompts": 7}}, base_dir=tmp_path)
    counts = [bench_config(sweep, sweep.servers[0], q, "http://x").num_prompts for q in sweep.qps]
    assert counts == [180, 45]
    plain = parse_sweep({**MINIMAL, "bench": {"num_prompts": 7}}, base_dir=tmp_path)
    assert bench_config(plain, plain.servers[0], 1.0, "http://x").num_prompts == 7


def test_unknown_bench_field_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown BenchConfig field") as err:
        parse_sweep({**MINIMAL, "servers": [{**MINIMAL["servers"][0],
                                             "bench": {"num_promts": 3}}]}, file="s.yaml")
    assert err.value.field == "servers[0].bench.num_promts" and err.value.file == "s.yaml"
    # A sweep built in code is checked when its runs are configured.
    sweep = parse_sweep(MINIMAL, file="s.yaml")
    sweep.bench["num_promts"] = 3
    with pytest.raises(InputError, match="num_promts"):
        bench_config(sweep, sweep.servers[0], 1.0, "http://x")


def test_failed_server_start_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    """Both servers' ports are taken, so both starts fail before launching vLLM."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        model = tmp_path / "model"
        model.mkdir()
        spec = {"name": "t", "out_dir": str(tmp_path / "out"), "qps": [1, 2],
                "servers": [{"server": {"model": str(model), "port": port}, "label": "a"},
                            {"server": {"model": str(model), "port": port}, "label": "b"}]}
        messages: list[str] = []
        statuses = run_sweep(parse_sweep(spec), echo=messages.append)
    assert [s["status"] for s in statuses] == ["failed"] * 4
    assert {s["model"] for s in statuses} == {"a", "b"}
    assert "already in use" in statuses[0]["error"]
    lines = (tmp_path / "out" / "_sweep" / "status.jsonl").read_text().splitlines()
    assert len(lines) == 4
    error = json.loads((tmp_path / "out" / "a" / "1xCPU" / "qps1-rep0" / "error.json")
                       .read_text())
    assert error["stage"] == "server" and "already in use" in error["error"]
    assert messages[-1].startswith("sweep t: 0 ok, 4 failed")
    # The folders hold only errors (no result): a second call runs them again without
    # --resume (issue 20; the port is still taken, so they fail again).
    again = run_sweep(parse_sweep(spec), echo=messages.append)
    assert [s["status"] for s in again] == ["failed"] * 4


class _StandInServer:
    """Test double for :class:`hgresearch.bench.server.vllm.VLLMServer` (vLLM cannot run here): it
    serves the local streaming test server, so everything else of a sweep runs for real."""

    starts: list[str] = []

    def __init__(self, config, log_dir) -> None:
        self.config = config
        self.log_path = Path(log_dir) / "server.log"
        self.ready_after_s = 0.0

    def __enter__(self):
        from hgresearch.bench.server.mock import MockServerConfig, serve_in_thread

        self.starts.append(self.config.name)
        self._serving = serve_in_thread(MockServerConfig(ttft_ms=1.0, itl_ms=0.5,
                                                         model=self.config.name))
        self.base_url = self._serving.__enter__()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text("started\n")
        return self

    def __exit__(self, *exc) -> None:
        self._serving.__exit__(*exc)

    def alive(self) -> bool:
        return True

    def info(self) -> dict:
        return {"base_url": self.base_url}


def test_sweep_writes_each_run_folder_and_resume_skips_finished_runs(tmp_path, monkeypatch):
    from hgresearch.bench.sweep import local as sweep_local
    from hgresearch.data.runfolder import is_finished, read_server_metrics, read_summary

    monkeypatch.setattr(sweep_local, "VLLMServer", _StandInServer)
    monkeypatch.setattr(_StandInServer, "starts", [])
    model = tmp_path / "model"
    model.mkdir()
    spec = {"name": "t", "out_dir": str(tmp_path / "out"), "qps": ["inf"], "repeats": 2,
            "warmup_requests": 0,
            "bench": {"num_prompts": 4, "telemetry": False, "idle_baseline_s": 0,
                      "workload": {"kind": "random", "input_len": 8, "output_len": 4}},
            "servers": [{"server": {"model": str(model)}, "label": "a"}]}
    messages: list[str] = []
    statuses = run_sweep(parse_sweep(spec), echo=messages.append)
    assert [s["status"] for s in statuses] == ["ok", "ok"], statuses
    for status in statuses:
        run_dir = Path(status["run_dir"])
        assert is_finished(run_dir) and read_summary(run_dir)["completed"] == 4
        assert read_server_metrics(run_dir)["available"] is False  # no /metrics to scrape
        assert (run_dir / "server.log").is_file()
    assert len((tmp_path / "out" / "_sweep" / "status.jsonl").read_text().splitlines()) == 2
    assert messages[-1].startswith("sweep t: 2 ok, 0 failed, 0 skipped")
    again = run_sweep(parse_sweep(spec), resume=True, echo=messages.append)
    assert [s["status"] for s in again] == ["skipped", "skipped"]
    assert _StandInServer.starts == ["model"]  # every run finished: no second server start
