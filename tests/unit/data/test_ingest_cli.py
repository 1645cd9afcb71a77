"""``hgresearch ingest``: each input that used to crash is one line ``error: …`` and exit 2;
``--hardware`` and ``--requests-output``; ``--skip-bad-lines`` skips a bad file and lists it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ingest_fixtures import vllm_bench_serve_record
from typer.testing import CliRunner

from hgresearch.cli import app
from hgresearch.report.writers import read_frame


def _ingest(*args: str):
    return CliRunner().invoke(app, ["ingest", *args])


def _one_line_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.output
    for word in words:
        assert word in errors[0]


def _bench_file(folder: Path, name: str = "bench.json", **change) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(vllm_bench_serve_record() | change) + "\n")
    return path


def test_hardware_option_and_requests_output(tmp_path):
    path = _bench_file(tmp_path / "in")
    out, requests_out = tmp_path / "runs.csv", tmp_path / "requests.parquet"
    result = _ingest(str(path), "--hardware", "2x RTX-4090", "-o", str(out),
                     "--requests-output", str(requests_out))
    assert result.exit_code == 0, result.output
    assert read_frame(out).hardware.tolist() == ["2x RTX-4090"]
    assert len(read_frame(requests_out)) == 3
    assert "1 runs from 1 file(s)" in result.stdout


def test_without_hardware_the_error_says_how_to_give_it(tmp_path):
    path = _bench_file(tmp_path)
    _one_line_error(_ingest(str(path), "-o", str(tmp_path / "r.csv")), str(path), "--hardware")


@pytest.mark.parametrize("case", ["binary", "empty_folder", "missing", "suffix", "hardware",
                                  "all_skipped", "negative"])
def test_crash_cases_are_one_line_errors(tmp_path, case):
    out = str(tmp_path / "runs.csv")
    target = tmp_path / "input"
    target.mkdir()
    args: list[str] = []
    words: tuple[str, ...] = ()
    if case == "binary":
        path = target / "x.json"
        path.write_bytes(b"\xff\xfe\x00binary")
        args, words = [str(path), "--skip-bad-lines"], ("every line was skipped",)
    elif case == "empty_folder":
        args, words = [str(target)], (str(target), "no result files")
    elif case == "missing":
        args, words = [str(tmp_path / "nope")], (str(tmp_path / "nope"), "no such file")
    elif case == "suffix":
        path = _bench_file(target)
        out = str(tmp_path / "runs.xlsx")
        args, words = [str(path), "--hardware", "1x RTX-4090"], ("runs.xlsx", "unsupported")
    elif case == "hardware":
        args, words = [str(_bench_file(target)), "--hardware", "2x Voodoo"], ("--hardware",)
    elif case == "all_skipped":
        (target / "x.jsonl").write_text('{"truncated": \n')
        args, words = [str(target), "--skip-bad-lines"], ("every line was skipped",)
    elif case == "negative":
        path = _bench_file(target, completed=-1)
        args, words = [str(path), "--hardware", "1x RTX-4090"], (f"{path}:1", "completed")
    result = _ingest(*args, "-o", out)
    _one_line_error(result, *words)
    assert not Path(out).exists()


def test_skip_bad_lines_skips_a_binary_file_and_lists_it(tmp_path):
    good = _bench_file(tmp_path)
    (tmp_path / "blob.json").write_bytes(b"\x89PNG\xff")
    out = tmp_path / "runs.csv"
    result = _ingest(str(tmp_path), "--hardware", "1x RTX-4090", "--skip-bad-lines", "-o",
                     str(out))
    assert result.exit_code == 0, result.output
    assert "blob.json" in result.stderr and "not a UTF-8 text file" in result.stderr
    assert read_frame(out).source_file.tolist() == [str(good)]
