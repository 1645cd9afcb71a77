"""Pareto frontier and roofline bounds."""

from __future__ import annotations

import pandas as pd
import pytest

from hgresearch.fits.roofline import decode_step_min_s, gpu_constants, model_constants
from hgresearch.fits.slo import pareto_frontier


def test_pareto_frontier_keeps_non_dominated_points():
    points = pd.DataFrame({"latency_ms": [10, 20, 30, 15, 40],
                           "cost_usd_per_1m_tok": [5.0, 3.0, 1.0, 6.0, 2.0]})
    front = pareto_frontier(points)
    assert front.latency_ms.tolist() == [10, 20, 30]


def test_decode_bound_by_hand():
    model = model_constants("DeepSeek-R1-Distill-Llama-8B")
    gpu = gpu_constants("H100-PCIe")
    # batch 1, no context: weights (8.03e9 − 128256·4096 embedding) × 2 bytes over 2 TB/s
    expected = (8.03e9 - 128256 * 4096) * 2 / 2000e9
    assert float(decode_step_min_s(1.0, 0.0, 1, model, gpu)) == pytest.approx(expected)
    # tensor parallel halves the time of a memory-bound step
    assert float(decode_step_min_s(1.0, 0.0, 2, model, gpu)) == pytest.approx(expected / 2)


def test_unknown_model_is_a_clear_error():
    from hgresearch.fits.common import ModelInputError

    with pytest.raises(ModelInputError, match="model_architectures.csv"):
        model_constants("no-such-model")
