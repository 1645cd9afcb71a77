"""``notebooks/01_benchmark.ipynb`` runs under papermill against the local test server (a test
double for vLLM) and writes the same run folders as ``hgresearch bench``."""

from __future__ import annotations

import json

import papermill as pm
import pytest

from hgresearch.bench.server.mock import MockServerConfig, serve_in_thread
from hgresearch.data.ingest import read_runs
from hgresearch.paths import REPO_ROOT

REPO = REPO_ROOT
NOTEBOOK = REPO / "notebooks" / "01_benchmark.ipynb"


def test_notebook_is_committed_without_outputs_and_not_in_reproduce():
    nb = json.loads(NOTEBOOK.read_text())
    assert not nb["metadata"].get("hgresearch", {}).get("reproduce")
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "parameters" in code[0]["metadata"]["tags"]
    assert all(not c["outputs"] and c["execution_count"] is None for c in code)
    assert not any("def " in "".join(c["source"]) for c in code)


@pytest.mark.slow
def test_notebook_runs_under_papermill_and_writes_run_folders(tmp_path):
    out = tmp_path / "runs"
    with serve_in_thread(MockServerConfig(ttft_ms=3, itl_ms=1)) as url:
        pm.execute_notebook(
            str(NOTEBOOK), str(tmp_path / "out.ipynb"), kernel_name="python3",
            progress_bar=False, cwd=str(REPO),
            parameters={"base_url": url, "model": "test-model", "qps": "[40, 20]",
                        "num_prompts": 12, "workload": "random:input_len=8,output_len=5",
                        "gpu_name": "RTX-4090", "gpu_count": 1, "idle_baseline_s": 0.0,
                        "telemetry": False, "output_dir": str(out),
                        "reference_dir": "", "build_dir": str(tmp_path / "b"),
                        "paper_dir": str(tmp_path / "p")})
    assert sorted(p.name for p in out.iterdir()) == ["qps20", "qps40"]
    for folder in out.iterdir():
        assert {p.name for p in folder.iterdir()} >= {"config.json", "requests.jsonl",
                                                      "summary.json"}
    runs = read_runs(out)
    assert sorted(runs.request_rate_qps) == [20.0, 40.0]
    assert (runs.completed == 12).all() and (runs.gpu_name == "RTX-4090").all()
