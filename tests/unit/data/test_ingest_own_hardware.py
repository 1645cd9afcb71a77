"""`ingest --hardware` is for files that name no hardware (its help says so): a run folder that
names its own keeps it, with a warning when they differ, instead of stopping; a JSON file that
is no benchmark result is "not a recognised format", not "20 required fields are missing"
(issue 20, item 6)."""

from __future__ import annotations

import json

import pandas as pd
from typer.testing import CliRunner

from hgresearch.cli import app
from hgresearch.paths import REPO_ROOT

SWEEP = REPO_ROOT / "data" / "raw" / "cpu-steady" / "protocol"


def test_hardware_option_does_not_override_a_run_folder_that_names_its_own(tmp_path):
    out = tmp_path / "runs.csv"
    result = CliRunner().invoke(app, ["ingest", str(SWEEP), "--hardware", "1x H200", "-o",
                                      str(out)])
    assert result.exit_code == 0, result.output
    assert set(pd.read_csv(out).hardware) == {"1x CPU"}
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings and all("names its own hardware, 1x CPU, which is kept" in w
                            for w in warnings)
    assert "UserWarning" not in result.output


def test_a_json_file_that_is_no_benchmark_is_not_a_recognised_format(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"model_id": "m", "num_prompts": 3, "server": {"port": 1}}))
    result = CliRunner().invoke(app, ["ingest", str(path), "-o", str(tmp_path / "r.csv")])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"error: {path}:1: not a recognised format")
    assert "required field" not in line
