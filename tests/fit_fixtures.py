"""Synthetic runs whose durations follow the saturation model (shared by the fits tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hgresearch.fits.saturation import Schedule, duration_model_s

RATES = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])


def synthetic_runs(mu: float, d0: float, d1: float = 0.0, factor: float = 0.95,
                   noise: float = 0.01, seed: int = 0, rates: np.ndarray = RATES,
                   model: str = "m", gpu: str = "RTX-4090", count: int = 1) -> pd.DataFrame:
    """Runs whose durations follow the capacity model, with seeded multiplicative noise."""
    rng = np.random.default_rng(seed)
    n = 200
    duration = duration_model_s(rates, n, mu, d0, d1, Schedule(factor))
    duration = duration * (1 + noise * rng.standard_normal(len(rates)))
    return pd.DataFrame({
        "run_id": [f"r{i}" for i in range(len(rates))], "model": model, "dataset": "sharegpt",
        "gpu_name": gpu, "gpu_count": count, "replicas": 1, "num_prompts": n,
        "request_rate_qps": rates, "duration_s": duration, "completed": n,
        "total_input_tok": 40000, "total_output_tok": 40000,
        "request_throughput_rps": n / duration,
        "p90_ttft_ms": 50.0 * (1 + rates / mu),
    })
