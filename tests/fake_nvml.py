"""A fake ``pynvml`` module for tests — a TEST DOUBLE: no GPU or NVML exists on the machines
that run the test suite. It replays recorded power samples per GPU (piecewise constant in
time since ``nvmlInit``, looping) and derives the cumulative energy counter as their exact
integral, so the energy a run should measure is known in advance.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


class NVMLError(Exception):
    """Stands for pynvml.NVMLError (e.g. NotSupported)."""


@dataclass
class _Util:
    gpu: int
    memory: int


@dataclass
class _Mem:
    total: int
    used: int
    free: int


#: Recorded power traces (seconds from start, watts): an H100 PCIe idling then loaded and an
#: RTX 4090 without the energy counter.
H100_TRACE = [(0.0, 62.0), (0.5, 180.0), (1.0, 240.0), (1.5, 310.0)]
CONSTANT_TRACE = [(0.0, 100.0)]


class FakeNVML:
    """Module-like object with the pynvml calls :mod:`hgresearch.bench.telemetry` uses."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVMLError = NVMLError

    def __init__(self, traces: list[list[tuple[float, float]]], names: list[str],
                 has_counter: list[bool] | None = None, period_s: float | None = None) -> None:
        self.traces = traces
        self.names = names
        self.has_counter = has_counter or [True] * len(traces)
        self.period_s = period_s  # loop the trace after this many seconds (None: hold last)
        self.t0_ns: int | None = None
        self.calls = 0

    # -- helpers -------------------------------------------------------------------------
    def _elapsed(self) -> float:
        assert self.t0_ns is not None, "nvmlInit not called"
        t = (time.monotonic_ns() - self.t0_ns) / 1e9
        return t % self.period_s if self.period_s else t

    def power_at(self, gpu: int, t: float) -> float:
        """Recorded power (W) at ``t`` seconds: the last sample at or before ``t``."""
        value = self.traces[gpu][0][1]
        for ts, p in self.traces[gpu]:
            if ts <= t:
                value = p
        return value

    def energy_until(self, gpu: int, t: float) -> float:
        """Exact integral (J) of the recorded power from 0 to ``t``."""
        trace = self.traces[gpu] + [(float("inf"), 0.0)]
        total = 0.0
        for (t1, p), (t2, _) in zip(trace, trace[1:], strict=False):
            if t <= t1:
                break
            total += p * (min(t, t2) - t1)
        return total

    # -- pynvml API ----------------------------------------------------------------------
    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self.t0_ns = time.monotonic_ns()

    def nvmlShutdown(self) -> None:  # noqa: N802
        pass

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.traces)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def nvmlDeviceGetName(self, h: int) -> str:  # noqa: N802
        return self.names[h]

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return "550.00-fake"

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:  # noqa: N802
        self.calls += 1
        return int(round(self.power_at(h, self._elapsed()) * 1000))  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:  # noqa: N802
        if not self.has_counter[h]:
            raise NVMLError("Not Supported")
        t = (time.monotonic_ns() - self.t0_ns) / 1e9  # never loops: the counter only grows
        return int(round(self.energy_until(h, t) * 1000))  # mJ

    def nvmlDeviceGetUtilizationRates(self, h: int) -> _Util:  # noqa: N802
        return _Util(gpu=90, memory=40)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> _Mem:  # noqa: N802
        return _Mem(total=80 * 2**30, used=60 * 2**30, free=20 * 2**30)

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:  # noqa: N802
        return 1755

    def nvmlDeviceGetTemperature(self, h: int, kind: int) -> int:  # noqa: N802
        return 55

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:  # noqa: N802
        return 350_000
