"""The planner says where its length classes lie beyond the calibration runs' requests."""

from __future__ import annotations

import pandas as pd

from hgresearch.plan import LengthClass, length_extrapolation_notes


def _runs() -> pd.DataFrame:
    # two reference-like runs (no run folder: lengths drawn to match their totals)
    return pd.DataFrame({"request_rate_qps": [1.0, 4.0], "completed": [200, 200],
                         "num_prompts": [200, 200], "total_input_tok": [41_000, 42_000],
                         "total_output_tok": [30_000, 31_000], "duration_s": [190.0, 52.0],
                         "run_dir": [None, None]})


def test_a_class_within_the_runs_gets_no_note() -> None:
    assert length_extrapolation_notes([LengthClass("short", 100, 50)], _runs()) == []


def test_a_longer_prompt_is_named_with_the_runs_range() -> None:
    [note] = length_extrapolation_notes(
        [LengthClass("short", 100, 50), LengthClass("default", 100_000, 50)], _runs())
    assert note.startswith("length class 'default' has 100,000 prompt tokens (calibration "
                           "runs: mean 205-210, longest ")
    assert "output tokens" not in note and "extrapolate the step-time model" in note


def test_no_runs_no_note() -> None:
    assert length_extrapolation_notes([LengthClass("x", 10**6, 10**6)], _runs().iloc[:0]) == []
