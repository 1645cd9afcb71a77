"""NVML telemetry: sampling, energy from the counter or the power integral, idle baseline.

NVML cannot exist on the test machines; :mod:`fake_nvml` (a documented test double) replays
recorded power traces and derives an exact energy counter from them.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest
from fake_nvml import CONSTANT_TRACE, H100_TRACE, FakeNVML

from hgresearch.accounting.energy import energy_over_windows, idle_power_w
from hgresearch.bench import telemetry
from hgresearch.bench.telemetry import Sampler
from hgresearch.data.runfolder import TELEMETRY_COLUMNS, read_telemetry


def _frame(rows):
    return pd.DataFrame(rows, columns=TELEMETRY_COLUMNS)


def test_counter_delta_is_interpolated_at_the_window_edges():
    # 100 W for 4 s, counter sampled every second.
    rows = [[int(t * 1e9), "run", 0, 100.0, 100.0 * t, 1, 1, 1, 1, 1, 350]
            for t in range(5)]
    energy, source = energy_over_windows(_frame(rows), [(int(0.5e9), int(3.25e9))])
    assert source == "nvml_energy_counter"
    assert energy == pytest.approx(275.0)


def test_power_integral_is_the_fallback_without_counter():
    rows = [[int(t * 1e9), "run", 0, p, "", 1, 1, 1, 1, 1, 350]
            for t, p in [(0, 100.0), (1, 200.0), (2, 200.0)]]
    energy, source = energy_over_windows(_frame(rows), [(0, int(2e9))])
    assert source == "nvml_power_integral"
    assert energy == pytest.approx(150 + 200)  # trapezoids


def test_uncovered_window_or_no_data_is_missing_not_zero():
    rows = [[int(t * 1e9), "run", 0, 100.0, 100.0 * t, 1, 1, 1, 1, 1, 350] for t in range(3)]
    assert energy_over_windows(_frame(rows), [(0, int(5e9))]) == (None, None)
    assert energy_over_windows(_frame([]), [(0, 1)]) == (None, None)
    assert idle_power_w(_frame(rows)) is None  # no idle samples


def test_sampler_without_nvml_is_unavailable(tmp_path, monkeypatch):
    def missing():
        raise ImportError("no NVML here")

    monkeypatch.setattr(telemetry, "_import_nvml", missing)
    sampler = Sampler(tmp_path / "telemetry.csv")
    assert sampler.start() is False
    assert "no NVML here" in sampler.reason
    sampler.stop()
    assert read_telemetry(tmp_path).empty
    assert (tmp_path / "telemetry.csv").read_text().strip() == ",".join(TELEMETRY_COLUMNS)


def test_sampler_records_replayed_samples_and_energy(tmp_path, monkeypatch):
    """Two GPUs: one with the counter (replayed H100 trace), one without (constant 100 W)."""
    fake = FakeNVML([H100_TRACE, CONSTANT_TRACE], ["NVIDIA H100 PCIe", "NVIDIA GeForce RTX 4090"],
                    has_counter=[True, False])
    monkeypatch.setattr(telemetry, "_import_nvml", lambda: fake)
    sampler = Sampler(tmp_path / "telemetry.csv", hz=50)
    assert sampler.start() is True
    assert [g["energy_counter"] for g in sampler.inventory] == [True, False]
    time.sleep(0.3)
    sampler.set_phase("run")
    t_start = time.monotonic_ns()
    time.sleep(1.0)
    t_end = time.monotonic_ns()
    time.sleep(0.1)
    sampler.stop()
    frame = read_telemetry(tmp_path)
    assert set(frame.phase) == {"idle", "run"} and set(frame.gpu_index) == {0, 1}
    assert frame[frame.gpu_index == 1].energy_counter_j.isna().all()
    # Idle: H100 trace starts at 62 W (first 0.5 s), RTX at 100 W.
    assert idle_power_w(frame) == pytest.approx(162.0, abs=0.5)
    h100 = frame[frame.gpu_index == 0]
    e_h100, src = energy_over_windows(h100, [(t_start, t_end)])
    assert src == "nvml_energy_counter"
    t0 = fake.t0_ns
    expected = (fake.energy_until(0, (t_end - t0) / 1e9)
                - fake.energy_until(0, (t_start - t0) / 1e9))
    assert e_h100 == pytest.approx(expected, rel=0.03)
    e_all, src = energy_over_windows(frame, [(t_start, t_end)])
    assert src == "nvml_power_integral"  # one GPU lacks the counter
    assert e_all == pytest.approx(expected + 100.0 * (t_end - t_start) / 1e9, rel=0.03)
