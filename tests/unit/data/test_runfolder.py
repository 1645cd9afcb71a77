"""The run folder's one reader and writer of each file (hgresearch.data.runfolder)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from energy_fixtures import make_run_folder

from hgresearch.accounting.energy import measured
from hgresearch.bench import telemetry
from hgresearch.data import runfolder
from hgresearch.data.runfolder import (
    TELEMETRY_COLUMNS,
    find_run_dirs,
    is_finished,
    read_config,
    read_requests,
    read_server_metrics,
    read_summary,
    read_telemetry,
    write_config,
    write_server_metrics,
    write_summary,
)
from hgresearch.errors import InputError

HEADER = ",".join(TELEMETRY_COLUMNS)


def _row(t_ns: int, phase: str = "run", power: str = "100.0") -> str:
    return f"{t_ns},{phase},0,{power},,50,10,1000,1500,60,350"


def test_one_telemetry_reader_and_one_column_list():
    """The sampler writes and the analysis reads the same columns, defined once."""
    assert telemetry.TELEMETRY_COLUMNS is runfolder.TELEMETRY_COLUMNS
    assert not hasattr(telemetry, "read_telemetry")
    assert measured.read_telemetry is read_telemetry
    assert not hasattr(measured, "TELEMETRY_COLUMNS")


def test_missing_or_header_only_telemetry_is_an_empty_table(tmp_path):
    assert list(read_telemetry(tmp_path).columns) == TELEMETRY_COLUMNS
    (tmp_path / "telemetry.csv").write_text(HEADER + "\n")
    frame = read_telemetry(tmp_path)
    assert frame.empty and list(frame.columns) == TELEMETRY_COLUMNS


def test_truncated_last_telemetry_line_is_dropped_but_a_bad_value_is_an_error(tmp_path):
    """A kill mid-write leaves the last line cut (no newline): the crash trace is dropped.
    The same cut line in the middle of the file is a bad file."""
    cut = "3000000000,ru"
    (tmp_path / "telemetry.csv").write_text(
        "\n".join([HEADER, _row(1_000_000_000), _row(2_000_000_000)]) + "\n" + cut)
    frame = read_telemetry(tmp_path)
    assert list(frame.t_ns) == [1_000_000_000, 2_000_000_000]
    assert frame.power_w.tolist() == [100.0, 100.0]
    (tmp_path / "telemetry.csv").write_text(
        "\n".join([HEADER, _row(1_000_000_000), _row(2_000_000_000, power="lots")]) + "\n")
    with pytest.raises(InputError) as err:
        read_telemetry(tmp_path)
    assert (err.value.line, err.value.field) == (3, "power_w")
    assert err.value.file.endswith("telemetry.csv")


def test_unknown_phase_and_missing_time_name_line_and_field(tmp_path):
    (tmp_path / "telemetry.csv").write_text("\n".join([HEADER, _row(1, phase="busy")]) + "\n")
    with pytest.raises(InputError) as err:
        read_telemetry(tmp_path)
    assert (err.value.line, err.value.field) == (2, "phase")
    (tmp_path / "telemetry.csv").write_text("\n".join([HEADER, _row(1), ",run,0,1"]) + "\n")
    with pytest.raises(InputError) as err:
        read_telemetry(tmp_path)
    assert (err.value.line, err.value.field) == (3, "t_ns")


def test_binary_telemetry_is_an_input_error(tmp_path):
    (tmp_path / "telemetry.csv").write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(InputError, match="UTF-8"):
        read_telemetry(tmp_path)


def test_parquet_is_read_when_there_is_no_csv(tmp_path):
    (tmp_path / "telemetry.csv").write_text(
        "\n".join([HEADER, _row(1_000_000_000, "idle"), _row(2_000_000_000)]) + "\n")
    from_csv = read_telemetry(tmp_path)
    pd.read_csv(tmp_path / "telemetry.csv").to_parquet(tmp_path / "telemetry.parquet")
    (tmp_path / "telemetry.csv").unlink()
    pd.testing.assert_frame_equal(read_telemetry(tmp_path), from_csv)


def test_requests_table_of_a_run_folder(tmp_path):
    assert read_requests(tmp_path).empty  # no requests.jsonl yet
    run = make_run_folder(tmp_path / "run")
    table = read_requests(run)
    assert len(table) > 0 and table.ttft_ms.notna().all()
    assert list(table.columns) == runfolder.REQUEST_COLUMNS


def test_json_files_round_trip_and_name_the_file_when_bad(tmp_path):
    write_config(tmp_path, {"config": {"seed": 1}})
    assert read_config(tmp_path) == {"config": {"seed": 1}}
    assert not is_finished(tmp_path)
    with pytest.raises(InputError, match="no summary.json"):
        read_summary(tmp_path)
    write_summary(tmp_path, {"completed": 3})
    assert is_finished(tmp_path) and read_summary(tmp_path) == {"completed": 3}
    (tmp_path / "summary.json").write_text('{"completed": 3,\n oops}')
    with pytest.raises(InputError) as err:
        read_summary(tmp_path)
    assert err.value.line == 2 and err.value.file.endswith("summary.json")


def test_server_metrics_are_optional_and_written_without_nan(tmp_path):
    assert read_server_metrics(tmp_path) is None
    write_server_metrics(tmp_path, {"server": {"ttft": {"p50_ms": math.nan}}, "a": [math.inf]})
    text = (tmp_path / "server_metrics.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert read_server_metrics(tmp_path) == {"a": [None], "server": {"ttft": {"p50_ms": None}}}


def test_find_run_dirs_returns_finished_runs_and_refuses_missing_paths(tmp_path):
    make_run_folder(tmp_path / "runs" / "b")
    make_run_folder(tmp_path / "runs" / "a" / "nested")
    (tmp_path / "runs" / "unfinished").mkdir()
    (tmp_path / "runs" / "unfinished" / "requests.jsonl").write_text("")
    assert find_run_dirs([tmp_path / "runs"]) == [tmp_path / "runs" / "a" / "nested",
                                                  tmp_path / "runs" / "b"]
    assert find_run_dirs([tmp_path / "runs" / "b"]) == [tmp_path / "runs" / "b"]
    with pytest.raises(InputError, match="not found"):
        find_run_dirs([tmp_path / "nowhere"])
    summary = json.loads((tmp_path / "runs" / "b" / "summary.json").read_text())
    assert read_summary(tmp_path / "runs" / "b") == summary
