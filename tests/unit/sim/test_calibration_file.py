"""The calibration file (issue 19, item 2): written and read back unchanged, every bad field one
error naming file, line and field, a changed run file a warning naming it."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path

import pytest

from hgresearch.errors import InputError
from hgresearch.sim.calibrate import StepCoefficients
from hgresearch.sim.calibration_file import (
    CalibrationFile,
    CalibrationFileWarning,
    catalog_architecture,
    parse_gpu_values,
    read_architecture,
    read_calibration_file,
    run_record,
    write_calibration_file,
)
from hgresearch.sim.replica_limits import KvCache


def _calibration(tmp_path: Path) -> CalibrationFile:
    run = tmp_path / "runs" / "summary.json"
    run.parent.mkdir(parents=True, exist_ok=True)
    run.write_text('{"completed": 10}\n')
    record = run_record([run], {"request_rate_qps": 4.0, "completed": 10,
                                "total_input_tok": 1000, "total_output_tok": 500,
                                "request_throughput_rps": 3.9}, "hgresearch")
    return CalibrationFile(
        label="1x H200", model="DeepSeek-R1-Distill-Qwen-14B", gpu_name="H200", gpu_count=1,
        architecture=catalog_architecture("DeepSeek-R1-Distill-Qwen-14B"), method="summaries",
        coefficients=StepCoefficients(0.012, 3e-5, 1e-4, 0.02),
        kv_cache=KvCache(30000, 16, "server_log", "runs/server.log"),
        intervals={"c0_s": (0.010, 0.014), "c_decode_s_per_seq": (5e-5, 2e-4)},
        runs=(record,), targets=("duration_s", "mean_tpot_ms"), rms_log_error=0.05,
        validation={"mean_tpot_ms": 7.5}, notes=("a note",), hgresearch_version="0.1.0")


def test_written_file_reads_back_to_the_same_calibration(tmp_path: Path) -> None:
    original = _calibration(tmp_path)
    path = write_calibration_file(original, tmp_path / "h200.calibration.yaml")
    read = read_calibration_file(path)
    assert dataclasses.replace(read, path=None) == original
    assert read.config_label == "DeepSeek-R1-Distill-Qwen-14B on 1x H200"
    fit = read.calibration()
    assert fit.replica.config.num_kv_blocks == 30000 and fit.replica.num_gpus == 1
    assert fit.extra["kv_source"] == "server_log"
    # the interval's half log-width over z = 1.96 is the relative standard error
    assert fit.rel_se[0] == pytest.approx(math.expm1(math.log(0.014 / 0.010) / (2 * 1.959964)))
    assert math.isnan(fit.rel_se[1])  # no interval for the prefill cost
    step = fit.coefficients.step_model(fit.replica)
    assert step.c_kv_s_per_token == pytest.approx(0.012 * fit.replica.kv_per_weight_byte)
    assert list(read.points().completed) == [10]


@pytest.mark.parametrize(("old", "new", "line_of", "field"), [
    ("format: hgresearch-calibration/1", "format: something-else", "format:", "format"),
    ("  num_blocks: 30000", "  num_blocks: 0", "  num_blocks:", "kv_cache.num_blocks"),
    ("  source: server_log", "  source: guessed", "  source: guessed", "kv_cache.source"),
    ("      value: 0.012", "      value: -1", "      value: -1",
     "step_time.coefficients.c0_s.value"),
    ("      low: 0.01", "      low: 0.013", "    c0_s:", "step_time.coefficients.c0_s"),
    ("label: 1x H200", "label: 2x H200", "label:", "label"),
    ("method: summaries", "method: guessing", "method:", "method"),
    ("gpu_count: 1", "gpu_count: one", "gpu_count:", "gpu_count"),
])
def test_a_bad_field_is_one_error_naming_file_line_and_field(
        tmp_path: Path, old: str, new: str, line_of: str, field: str) -> None:
    path = write_calibration_file(_calibration(tmp_path), tmp_path / "c.calibration.yaml")
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), start=1)
                if ln.startswith(line_of))
    with pytest.raises(InputError) as err:
        read_calibration_file(path)
    assert str(err.value).startswith(f"{path}:{line}, field '{field}': ")
    assert "\n" not in str(err.value)


def test_a_missing_key_and_a_bad_hash_name_their_field(tmp_path: Path) -> None:
    path = write_calibration_file(_calibration(tmp_path), tmp_path / "c.calibration.yaml")
    text = path.read_text()
    path.write_text(text.replace("  head_dim: 128\n", ""))
    with pytest.raises(InputError, match=r"field 'architecture.head_dim': missing \(required\)"):
        read_calibration_file(path)
    path.write_text(text.replace("sha256: ", "sha256: zz", 1))
    with pytest.raises(InputError, match=r"field 'runs\[0\].files\[0\].sha256': expected 64 hex"):
        read_calibration_file(path)


def test_a_changed_or_missing_run_file_is_a_warning_naming_it(tmp_path: Path) -> None:
    path = write_calibration_file(_calibration(tmp_path), tmp_path / "c.calibration.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_calibration_file(path)  # unchanged: no warning
    run = tmp_path / "runs" / "summary.json"
    run.write_text('{"completed": 11}\n')
    with pytest.warns(CalibrationFileWarning, match=r"runs/summary.json: SHA-256 differs"):
        calibration = read_calibration_file(path)
    assert calibration.coefficients.c0_s == 0.012  # still usable
    run.unlink()
    with pytest.warns(CalibrationFileWarning, match=r"runs/summary.json: run file .* not found"):
        read_calibration_file(path)


def test_gpu_values_parse_and_name_the_option() -> None:
    assert parse_gpu_values(["H200=3.5", "NVIDIA H100 PCIe=2", "MI300X=4"], "--price", "USD") \
        == {"H200": 3.5, "H100-PCIe": 2.0, "MI300X": 4.0}
    for bad in ("H200", "=3", "H200=cheap", "H200=-1"):
        with pytest.raises(InputError, match="field '--tdp': expected GPU=W"):
            parse_gpu_values([bad], "--tdp", "W")


def test_architecture_from_a_hugging_face_config(tmp_path: Path) -> None:
    """The 14B model's config.json gives the catalog's architecture (parameters counted from
    the sizes within 1% of the published count)."""
    config = {"num_hidden_layers": 48, "hidden_size": 5120, "num_attention_heads": 40,
              "num_key_value_heads": 8, "intermediate_size": 13824, "vocab_size": 152064,
              "torch_dtype": "bfloat16", "tie_word_embeddings": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    got = read_architecture(path, "my-14b")
    want = catalog_architecture("DeepSeek-R1-Distill-Qwen-14B")
    assert (got.num_layers, got.num_kv_heads, got.head_dim, got.weight_bytes_per_param) == \
        (want.num_layers, want.num_kv_heads, want.head_dim, want.weight_bytes_per_param)
    assert got.params_b == pytest.approx(want.params_b, rel=0.01)
    assert got.name == "my-14b" and got.kv_bytes_per_token == want.kv_bytes_per_token
    path.write_text(json.dumps({**config, "num_local_experts": 8}))
    with pytest.raises(InputError, match="mixture-of-experts"):
        read_architecture(path, "moe")
    path.write_text("num_layers: 2\nnum_kv_heads: 4\nhead_dim: 64\nparams_b: 0\n")
    with pytest.raises(InputError, match=r"config.json:4, field 'params_b'"):
        read_architecture(path, "tiny")
