"""GPU telemetry through NVML: the sampler thread that writes a run's ``telemetry.csv``.

This is the only module that imports ``pynvml`` (nvidia-ml-py), and only the measurement side
imports it. Without NVML (no driver, no GPU: this development machine) sampling is marked
unavailable once and every energy field is a missing value, never zero.

Samples go to ``telemetry.csv`` (one row per sample per GPU, columns
:data:`hgresearch.data.runfolder.TELEMETRY_COLUMNS`, time on ``time.monotonic_ns()`` like the
request
records); :func:`hgresearch.data.runfolder.read_telemetry` reads it back and
:func:`hgresearch.accounting.energy.energy_over_windows` turns samples into energy.
"""

from __future__ import annotations

import csv
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from hgresearch.data.runfolder import TELEMETRY_COLUMNS


def _import_nvml() -> ModuleType:
    """The NVML binding (tests replace this function to return a fake module)."""
    import pynvml

    module: ModuleType = pynvml  # untyped binding: Any to the checker
    return module


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
