"""GPU telemetry through NVML: a sampler thread and the run's energy from its samples.

This is the only module that imports ``pynvml`` (nvidia-ml-py). Without NVML (no driver, no
GPU: this development machine) sampling is marked unavailable once and every energy field is a
missing value, never zero.

Samples go to ``telemetry.csv`` (one row per sample per GPU, columns :data:`TELEMETRY_COLUMNS`,
time on ``time.monotonic_ns()`` like the request records). Energy over a window is the delta of
NVML's cumulative total-energy counter (probed once per GPU; H100 and RTX 4090 have it),
linearly interpolated at the window edges; for GPUs without the counter, the trapezoidal
integral of power (``energy_source`` says which).
"""

from __future__ import annotations

import csv
import math
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

TELEMETRY_COLUMNS = ["t_ns", "phase", "gpu_index", "power_w", "energy_counter_j",
                     "gpu_util_pct", "mem_util_pct", "mem_used_mib", "sm_clock_mhz",
                     "temperature_c", "power_limit_w"]


def _import_nvml() -> ModuleType:
    """The NVML binding (tests replace this function to return a fake module)."""
    import pynvml

    return pynvml


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - NVML raises per-field NotSupported errors
        return None


class Sampler:
    """Samples every GPU at ``hz`` in a background thread and appends rows to ``csv_path``.

    Use :meth:`start` (opens NVML; returns False when unavailable), :meth:`set_phase` (``idle``
    for the baseline before the run, ``warmup`` while warm-up requests run, ``run`` during the
    run) and :meth:`stop`. Rows are flushed about once a second,
    so a killed run keeps its telemetry up to then.
    """

    def __init__(self, csv_path: Path, hz: float = 10.0) -> None:
        self.csv_path = Path(csv_path)
        self.hz = hz
        self.phase = "idle"
        self.available = False
        self.reason: str | None = None
        self.inventory: list[dict[str, Any]] = []
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._has_counter: list[bool] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Open NVML, probe the GPUs once and start sampling; False (with ``reason``) if no NVML."""
        new_file = not self.csv_path.exists() or self.csv_path.stat().st_size == 0
        self._fh = open(self.csv_path, "a", newline="", encoding="utf-8")  # noqa: SIM115
        self._csv = csv.writer(self._fh)
        if new_file:
            self._csv.writerow(TELEMETRY_COLUMNS)
            self._fh.flush()
        try:
            nvml = _import_nvml()
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except Exception as err:  # noqa: BLE001 - missing library, driver or GPU
            self.reason = f"NVML unavailable: {type(err).__name__}: {err}"
            return False
        self._nvml = nvml
        for i in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            self._handles.append(handle)
            self._has_counter.append(
                _try(nvml.nvmlDeviceGetTotalEnergyConsumption, handle) is not None)
            name = _try(nvml.nvmlDeviceGetName, handle)
            mem = _try(nvml.nvmlDeviceGetMemoryInfo, handle)
            limit = _try(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            self.inventory.append({
                "index": i,
                "name": name.decode() if isinstance(name, bytes) else name,
                "memory_total_mib": mem.total / 2**20 if mem is not None else None,
                "power_limit_w": limit / 1000 if limit is not None else None,
                "energy_counter": self._has_counter[-1],
            })
        driver = _try(nvml.nvmlSystemGetDriverVersion)
        for gpu in self.inventory:
            gpu["driver"] = driver.decode() if isinstance(driver, bytes) else driver
        self.available = count > 0
        if not self.available:
            self.reason = "NVML found no GPU"
            return False
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()
        return True

    def set_phase(self, phase: str) -> None:
        """Label the following samples (``idle``, ``warmup`` or ``run``)."""
        self.phase = phase

    def sample_once(self) -> list[list[Any]]:
        """One row per GPU, read now."""
        nvml = self._nvml
        rows = []
        for i, h in enumerate(self._handles):
            t = time.monotonic_ns()
            power = _try(nvml.nvmlDeviceGetPowerUsage, h)
            energy = _try(nvml.nvmlDeviceGetTotalEnergyConsumption, h) \
                if self._has_counter[i] else None
            util = _try(nvml.nvmlDeviceGetUtilizationRates, h)
            mem = _try(nvml.nvmlDeviceGetMemoryInfo, h)
            clock = _try(nvml.nvmlDeviceGetClockInfo, h, getattr(nvml, "NVML_CLOCK_SM", 1))
            temp = _try(nvml.nvmlDeviceGetTemperature, h,
                        getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
            limit = _try(nvml.nvmlDeviceGetEnforcedPowerLimit, h)
            rows.append([
                t, self.phase, i,
                power / 1000 if power is not None else "",        # mW -> W
                energy / 1000 if energy is not None else "",      # mJ -> J
                util.gpu if util is not None else "", util.memory if util is not None else "",
                mem.used / 2**20 if mem is not None else "",
                clock if clock is not None else "", temp if temp is not None else "",
                limit / 1000 if limit is not None else "",
            ])
        return rows

    def _loop(self) -> None:
        period_ns = int(1e9 / self.hz)
        next_t = time.monotonic_ns()
        last_flush = next_t
        while not self._stop.is_set():
            self._csv.writerows(self.sample_once())
            now = time.monotonic_ns()
            if now - last_flush > 1e9:
                self._fh.flush()
                last_flush = now
            # Absolute ticks: a slow NVML call does not shift later samples.
            next_t += period_ns
            self._stop.wait(max(0.0, (next_t - time.monotonic_ns()) / 1e9))

    def stop(self) -> None:
        """Take a last sample, stop the thread and close the file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._csv.writerows(self.sample_once())
        self._fh.flush()
        self._fh.close()
        if self._nvml is not None:
            _try(self._nvml.nvmlShutdown)


def read_telemetry(path: Path) -> pd.DataFrame:
    """``telemetry.csv`` as a table (empty with the documented columns when absent)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=TELEMETRY_COLUMNS)
    frame = pd.read_csv(path, on_bad_lines="skip")  # a killed run may cut the last line
    return frame.dropna(subset=["t_ns", "gpu_index"])


def _interp(t: np.ndarray, y: np.ndarray, at: float) -> float:
    return float(np.interp(at, t, y))


def _gpu_energy_j(gpu: pd.DataFrame, start: float, end: float) -> tuple[float, str | None]:
    gpu = gpu.sort_values("t_ns")
    t = gpu.t_ns.to_numpy(dtype="float64")
    if len(t) < 2 or t[0] > start or t[-1] < end:
        return math.nan, None  # samples do not cover the window
    counter = pd.to_numeric(gpu.energy_counter_j, errors="coerce").to_numpy()
    if not np.isnan(counter).any():
        return _interp(t, counter, end) - _interp(t, counter, start), "nvml_energy_counter"
    power = pd.to_numeric(gpu.power_w, errors="coerce").to_numpy()
    keep = ~np.isnan(power)
    if keep.sum() < 2:
        return math.nan, None
    t, power = t[keep], power[keep]
    inside = (t > start) & (t < end)
    grid = np.concatenate([[start], t[inside], [end]])
    values = np.interp(grid, t, power)
    return float(np.sum((values[1:] + values[:-1]) / 2 * np.diff(grid)) / 1e9), \
        "nvml_power_integral"


def energy_over_windows(telemetry: pd.DataFrame,
                        windows: list[tuple[int, int]]) -> tuple[float | None, str | None]:
    """Energy (J, summed over GPUs and windows) and its source; (None, None) without data."""
    if telemetry.empty or not windows:
        return None, None
    total, sources = 0.0, set()
    for _, gpu in telemetry.groupby("gpu_index"):
        for start, end in windows:
            value, source = _gpu_energy_j(gpu, start, end)
            if math.isnan(value):
                return None, None
            total += value
            sources.add(source)
    # One source name: the counter only when every GPU had it.
    source = "nvml_power_integral" if "nvml_power_integral" in sources else "nvml_energy_counter"
    return total, source


def idle_power_w(telemetry: pd.DataFrame) -> float | None:
    """Mean power of the idle baseline, summed over GPUs (W); None without idle samples."""
    idle = telemetry[telemetry.phase == "idle"]
    if idle.empty:
        return None
    per_gpu = pd.to_numeric(idle.power_w, errors="coerce").groupby(idle.gpu_index).mean()
    return None if per_gpu.isna().any() else float(per_gpu.sum())
