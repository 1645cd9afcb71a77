"""A fleet file's replica by calibration file (issue 19, item 2): ``calibration:`` names a file
of `hgresearch sim calibrate` (relative to the fleet file), the replica runs it; a mismatch or a
bad file is one error naming the fleet file's line and field."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from hgresearch.errors import InputError
from hgresearch.sim.calibrate import StepCoefficients
from hgresearch.sim.calibration_file import (
    CalibrationFile,
    catalog_architecture,
    run_record,
    write_calibration_file,
)
from hgresearch.sim.fleet import CALIBRATION_FILE, ROOFLINE_ONLY, sim_replicas, tdp_or_nan
from hgresearch.sim.fleet_spec import load_fleet
from hgresearch.sim.replica_limits import KvCache


def _write(folder: Path) -> Path:
    run = folder / "run.json"
    run.write_text("{}\n")
    calibration = CalibrationFile(
        label="1x MI300X", model="tiny-llama-cpu", gpu_name="MI300X", gpu_count=1,
        architecture=catalog_architecture("tiny-llama-cpu"), method="summaries",
        coefficients=StepCoefficients(0.002, 1e-5, 1e-4, 0.01),
        kv_cache=KvCache(777, 16, "given", "--kv-blocks"),
        runs=(run_record([run], {"request_rate_qps": 1.0, "completed": 5,
                                 "total_input_tok": 500, "total_output_tok": 100}),))
    return write_calibration_file(calibration, folder / "cals" / "mi300x.calibration.yaml")


def test_a_replica_runs_its_calibration_file(tmp_path: Path) -> None:
    _write(tmp_path)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("replicas:\n  - calibration: cals/mi300x.calibration.yaml\n    count: 2\n"
                     "  - config: tiny-llama-cpu on 1x RTX-4090\n")
    spec = load_fleet(fleet)
    assert spec.replicas[0].name == "tiny-llama-cpu on 1x MI300X #1"
    replicas = sim_replicas(spec, fits={}, prices_usd_per_gpu_h={"MI300X": 3.0})
    mine, other = replicas[0], replicas[2]
    assert mine.step_time_source == CALIBRATION_FILE and other.step_time_source == ROOFLINE_ONLY
    assert mine.config.num_kv_blocks == 777 and mine.ttft_offset_s == 0.01
    assert mine.price_usd_per_gpu_h == 3.0 and other.price_usd_per_gpu_h == 0.25
    no_price = sim_replicas(spec, fits={})[0]
    assert math.isnan(no_price.price_usd_per_gpu_h)
    assert math.isnan(tdp_or_nan("MI300X")) and tdp_or_nan("MI300X", {"MI300X": 750}) == 750


@pytest.mark.parametrize(("entry", "line", "field", "message"), [
    ("  - calibration: cals/mi300x.calibration.yaml\n    config: tiny-llama-cpu on 1x H200\n",
     3, "replicas[0].config", "calibrates 'tiny-llama-cpu on 1x MI300X', not"),
    ("  - calibration: cals/none.calibration.yaml\n", 2, "replicas[0].calibration",
     "calibration file not found"),
    ("  - calibration: 3\n", 2, "replicas[0].calibration", "expected the path"),
])
def test_a_bad_calibration_entry_names_the_fleet_files_line(
        tmp_path: Path, entry: str, line: int, field: str, message: str) -> None:
    _write(tmp_path)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("replicas:\n" + entry)
    with pytest.raises(InputError) as err:
        load_fleet(fleet)
    assert str(err.value).startswith(f"{fleet}:{line}, field '{field}': ")
    assert message in str(err.value)


def test_candidates_cover_their_configurations_without_the_reference_calibrations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica a candidate calibrates needs no calibration of the reference data (whose first
    fit takes minutes)."""
    from hgresearch.sim import fleet as fleet_module
    from hgresearch.sim.calibration_file import read_calibration_file

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the reference calibrations were loaded")

    monkeypatch.setattr(fleet_module, "fleet_calibrations", refuse)
    calibration = read_calibration_file(_write(tmp_path))
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("replicas:\n  - config: tiny-llama-cpu on 1x MI300X\n")
    [replica] = sim_replicas(load_fleet(fleet),
                             candidates={calibration.config_label: calibration.calibration()})
    assert replica.step_time_source == CALIBRATION_FILE
    assert dataclasses.asdict(calibration.coefficients)["c0_s"] == 0.002
