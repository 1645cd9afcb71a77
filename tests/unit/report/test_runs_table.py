"""A notebook run on its own finds its runs table even where notebook 02 never ran (issue 20,
item 3): it is built as 02 builds it, with a line saying so, instead of a pyarrow traceback;
and notebook 03's headline follows its own hardware list (a model without 8x RTX-4090 runs)."""

from __future__ import annotations

import pandas as pd

from hgresearch.data.ingest import read_runs
from hgresearch.report import paper_tables
from hgresearch.report.writers import RUNS_TABLE, runs_table


def test_a_missing_runs_table_is_built_as_notebook_02_builds_it(tmp_path, reference_dir):
    lines: list[str] = []
    built = runs_table(tmp_path / "build", reference_dir, echo=lines.append)
    [line] = lines
    assert line.startswith(f"{tmp_path / 'build' / RUNS_TABLE} is missing (notebook 02_ingest "
                           "writes it): building it from")
    expected = read_runs(reference_dir, relative_to=reference_dir)
    pd.testing.assert_frame_equal(built, expected)
    again: list[str] = []
    pd.testing.assert_frame_equal(runs_table(tmp_path / "build", echo=again.append), expected)
    assert again == []  # read, not built, the second time


def test_headline_of_another_model_on_its_own_hardware(reference_runs):
    hardware = ["1x H100-PCIe", "2x RTX-4090", "4x RTX-4090"]
    headline = paper_tables.headline_numbers(reference_runs, "DeepSeek-R1-Distill-Qwen-7B",
                                             "alternative", hardware)
    cheapest = [key for key in headline if key.startswith("cheapest")]
    assert len(cheapest) == 3 and all("DeepSeek-R1-Distill-Qwen-7B" in key for key in cheapest)
