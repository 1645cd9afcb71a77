"""Every figure of the reproduce notebooks is readable: no two text labels overlap, annotations
stay inside their axes and no legend covers data (:mod:`hgresearch.report.figures.layout`).

The figures are built from the paper's raw results and the committed CPU sweep with the same
library calls as notebooks 03-06 and 09 and their default parameters (slow: the model fits and the
bootstrap take a while)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import matplotlib.pyplot as plt
import numpy as np
import pytest

from hgresearch.accounting.crosscheck import requests_of_runs, server_crosscheck
from hgresearch.data.ingest import read_runs, select_repeats
from hgresearch.fits import ModelWarning
from hgresearch.fits.slo import default_slos
from hgresearch.paths import REPO_ROOT
from hgresearch.report import audit
from hgresearch.report import energy as energy_report
from hgresearch.report import paper_tables as paper
from hgresearch.report.figures import audit as audit_figures
from hgresearch.report.figures import energy as energy_figures
from hgresearch.report.figures import fits as model_figures
from hgresearch.report.figures import paper as paper_figures
from hgresearch.report.figures import serving as serving_figures
from hgresearch.report.figures.layout import (
    FigureLayoutWarning,
    annotations_outside,
    axes_without_labels,
    layout_problems,
    legends_over_data,
    overlapping_labels,
    spread_positions,
)
from hgresearch.report.figures.style import COUNT_SHADES, color_for, save_figure
from hgresearch.report.fits import analyse_models, select_configurations

CPU_SWEEP = REPO_ROOT / "data" / "raw" / "cpu-tiny"

# Defaults of the notebooks' parameter cells.
MODEL_03 = "DeepSeek-R1-Distill-Qwen-14B"
HARDWARE_03 = ["1x H100-PCIe", "2x RTX-4090", "4x RTX-4090", "8x RTX-4090"]
MODEL_04 = "DeepSeek-R1-Distill-Llama-8B"
GRID_REGIONS_05 = ["EU-27", "FR", "DE", "PL", "NO", "SE", "US", "US-CA", "US-TX", "IN", "CN",
                   "BR", "WORLD"]


@pytest.fixture(scope="module")
def runs(reference_dir):
    return read_runs(reference_dir, relative_to=reference_dir)


@pytest.fixture(scope="module")
def notebook03(runs) -> dict[str, Callable[[], plt.Figure]]:
    points = paper.scaling_points(runs, MODEL_03, HARDWARE_03, "alternative", "first")
    projection = paper.project_replicas(points, "2x RTX-4090", 4, 16.0)
    annotated = paper.configuration_runs(runs, MODEL_03, HARDWARE_03, "alternative", "first")
    ratios = paper.throughput_ratio_table(runs, repeat_policy="first")
    return {
        "figure1_scaling": lambda: paper_figures.figure1_scaling(
            points, HARDWARE_03[:2], MODEL_03, projection),
        "figure1_scaling_all_configurations": lambda: paper_figures.figure1_scaling(
            points, HARDWARE_03, MODEL_03, projection),
        "ttft_percentiles_vs_qps": lambda: paper_figures.ttft_percentiles_vs_qps(
            annotated, HARDWARE_03, MODEL_03, slo_ms=55.0),
        "cost_vs_qps": lambda: paper_figures.cost_vs_qps(annotated, HARDWARE_03, MODEL_03),
        "throughput_ratio_heatmap": lambda: paper_figures.throughput_ratio_heatmap(ratios),
    }


@pytest.fixture(scope="module")
def notebook04(runs, tmp_path_factory) -> dict[str, Callable[[], plt.Figure]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        report = analyse_models(runs, scenario="alternative",
                                slos=default_slos([50, 100, 200, 500, 1000, 2000, 5000],
                                                  ["p90_ttft_ms", "p99_ttft_ms"]),
                                latency_form="loglinear", drain="constant",
                                build_dir=tmp_path_factory.mktemp("build04"))
    models = report.models
    shown = select_configurations(models.capacity, MODEL_04, []).configuration.tolist()
    return {
        "models_capacity_fits": lambda: model_figures.capacity_fits_figure(
            report.runs, models, MODEL_04, shown),
        "models_capacity_summary": lambda: model_figures.capacity_summary_figure(
            models.capacity),
        "models_latency": lambda: model_figures.latency_fits_figure(
            report.runs, models, ["p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms"],
            MODEL_04, shown),
        "models_scaling": lambda: model_figures.scaling_figure(report.scaling_points,
                                                               report.scaling_summary),
        "models_pareto": lambda: model_figures.pareto_figure(report.curves, report.frontier,
                                                             MODEL_04, "p90_ttft_ms"),
        "models_roofline": lambda: model_figures.roofline_figure(report.roofline),
        "models_validation": lambda: model_figures.validation_figure(report.predictions),
    }


@pytest.fixture(scope="module")
def notebook05(reference_dir) -> dict[str, Callable[[], plt.Figure]]:
    all_runs = read_runs(reference_dir, relative_to=reference_dir)
    report = energy_report.analyse_energy(
        all_runs, model=MODEL_03, configurations=[("H100-PCIe", 1, 16.0), ("RTX-4090", 2, 4.0)],
        grid_regions=GRID_REGIONS_05)
    return {
        "energy_efficiency_ratio_bracket": lambda: energy_figures.efficiency_ratio_bracket(
            report.estimates),
        "energy_tokens_per_kwh_vs_qps": lambda: energy_figures.tokens_per_kwh_vs_qps(
            report.per_point, MODEL_03),
        "carbon_stacked_per_region": lambda: energy_figures.carbon_stacked(report.carbon),
        "carbon_break_even": lambda: energy_figures.break_even(
            report.totals, report.grid, report.crossings),
    }


@pytest.fixture(scope="module")
def notebook06() -> dict[str, Callable[[], plt.Figure]]:
    runs = read_runs(CPU_SWEEP, relative_to=CPU_SWEEP)
    points = select_repeats(runs, "mean")
    model = "tiny-llama-cpu"
    return {
        "cpu_sweep_achieved_vs_offered": lambda: serving_figures.achieved_vs_offered(
            runs, f"{model} on vLLM for CPU: offered vs achieved load"),
        "cpu_sweep_ttft_percentiles_vs_qps": lambda: paper_figures.ttft_percentiles_vs_qps(
            points, sorted(points.hardware.unique()), model, slo_ms=2000.0),
        "cpu_sweep_client_vs_server_ttft": lambda: serving_figures.client_vs_server_ttft(
            server_crosscheck(runs),
            f"{model}: TTFT seen by the client vs the server's histogram"),
        "cpu_sweep_latency_ecdf": lambda: serving_figures.latency_ecdf_per_qps(
            requests_of_runs(runs), f"{model} on vLLM for CPU: per-request latency",
            slo_ms={"ttft_ms": 2000.0}),
    }


@pytest.fixture(scope="module")
def notebook09(runs) -> dict[str, Callable[[], plt.Figure]]:
    every = audit.comparisons(runs, audit.fitted_capacity(runs))
    return {"audit_ratio_claims": lambda: audit_figures.ratio_claims_figure(every)}


FIGURES = {
    "notebook03": ["figure1_scaling", "figure1_scaling_all_configurations",
                   "ttft_percentiles_vs_qps", "cost_vs_qps", "throughput_ratio_heatmap"],
    "notebook04": ["models_capacity_fits", "models_capacity_summary", "models_latency",
                   "models_scaling", "models_pareto", "models_roofline", "models_validation"],
    "notebook05": ["energy_efficiency_ratio_bracket", "energy_tokens_per_kwh_vs_qps",
                   "carbon_stacked_per_region", "carbon_break_even"],
    "notebook06": ["cpu_sweep_achieved_vs_offered", "cpu_sweep_ttft_percentiles_vs_qps",
                   "cpu_sweep_client_vs_server_ttft", "cpu_sweep_latency_ecdf"],
    "notebook09": ["audit_ratio_claims"],
}


#: Figures whose inputs take minutes to compute (the simulator's calibrations): checked by
#: save_figure's own layout check during reproduce (tests/test_reproduce.py); the routing
#: comparison's figure also on stand-in calibrations (tests/test_sim_study.py), the fleet
#: planner's figure functions on constructed data (tests/test_plan.py).
CHECKED_IN_REPRODUCE = {"sim_validation", "sim_sustained_cpu", "sim_routing_comparison",
                        "fleet_cost_carbon_vs_demand",
                        "fleet_pareto", "fleet_day"}


def test_every_committed_figure_is_checked():
    checked = {name for names in FIGURES.values() for name in names} | CHECKED_IN_REPRODUCE
    committed = {p.stem for p in (REPO_ROOT / "paper" / "figures").glob("*.png")}
    assert committed <= checked, f"figures without a layout test: {committed - checked}"


@pytest.mark.slow
@pytest.mark.parametrize("notebook, name", [(nb, name) for nb, names in FIGURES.items()
                                            for name in names])
def test_figure_is_readable(notebook, name, request):
    fig = request.getfixturevalue(notebook)[name]()
    try:
        assert layout_problems(fig) == [], name
    finally:
        plt.close(fig)


# The checks themselves, on figures built to fail them.

def test_overlapping_labels_are_found():
    fig, ax = plt.subplots()
    ax.annotate("$0.123", (0.5, 0.5))
    ax.annotate("$0.456", (0.5, 0.5))
    ax.annotate("apart", (0.1, 0.1))
    pairs = overlapping_labels(fig)
    assert [(a.text, b.text) for a, b in pairs] == [("$0.123", "$0.456")]
    plt.close(fig)


def test_labels_of_ticks_outside_the_limits_and_hidden_panels_are_ignored():
    fig, (ax, hidden) = plt.subplots(1, 2)
    ax.plot([0, 1], [0, 1])
    hidden.annotate("hidden", (0.5, 0.5))
    hidden.annotate("hidden too", (0.5, 0.5))
    hidden.set_visible(False)
    assert overlapping_labels(fig) == []
    plt.close(fig)


def test_annotation_below_the_axis_is_outside():
    fig, ax = plt.subplots()
    ax.set_ylim(0, 1)
    ax.annotate("$0.3", (1, 0.05), xytext=(1, -0.3))
    ax.annotate("region", (0.5, 1.0), xycoords="axes fraction", xytext=(0, 4),
                textcoords="offset points")  # above the axes on purpose, inside the figure
    assert [label.text for label in annotations_outside(fig)] == ["$0.3"]
    plt.close(fig)


def test_legend_over_a_bar_is_found():
    fig, ax = plt.subplots()
    ax.bar([0, 1, 2], [10, 10, 10], label="a tall bar")
    ax.legend(loc="upper left")
    assert legends_over_data(fig) and "covers a bar" in legends_over_data(fig)[0]
    ax.set_ylim(0, 20)
    assert legends_over_data(fig) == []
    plt.close(fig)


def test_panel_without_a_y_label_is_found_unless_it_shares_a_labelled_axis():
    """audit_ratio_claims (then models_ratio_audit) had numbers on three y axes and a label on
    one."""
    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        ax.plot([1, 2], [0.5, 0.7])
        ax.set_xlabel("offered rate (req/s)")
    axes[0].set_ylabel("ratio")
    assert axes_without_labels(fig) == ["y axis of 'a panel' has no label"]
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, sharey=True)
    for ax in axes:
        ax.plot([1, 2], [0.5, 0.7])
        ax.set_xlabel("offered rate (req/s)")
    axes[0].set_ylabel("ratio")
    names, ax_names = plt.subplots()
    ax_names.barh(["a", "b"], [1, 2])  # names on y need no label; numbers on x do
    assert axes_without_labels(fig) == []
    assert axes_without_labels(names) == ["x axis of 'a panel' has no label"]
    plt.close(fig)
    plt.close(names)


def test_save_figure_warns_about_overlapping_labels(tmp_path):
    fig, ax = plt.subplots()
    ax.annotate("one", (0.5, 0.5))
    ax.annotate("two", (0.5, 0.5))
    with pytest.warns(FigureLayoutWarning, match="'one' overlaps annotation 'two'"):
        save_figure(fig, tmp_path / "crowded")
    plt.close(fig)


def test_spread_positions_keeps_order_gap_and_bounds():
    placed = spread_positions([5.0, 5.1, 5.2, 9.0], min_gap=1.0)
    assert placed.tolist() == pytest.approx([4.1, 5.1, 6.1, 9.0])  # centred on their mean
    placed = spread_positions([0.2, 0.0, 0.1], min_gap=1.0, low=0.0)
    assert placed.tolist() == pytest.approx([2.0, 0.0, 1.0])  # input order kept
    placed = spread_positions([10.0, 9.9], min_gap=1.0, high=10.0)
    assert placed.tolist() == pytest.approx([10.0, 9.0])
    assert spread_positions([1.0, 3.0], min_gap=1.0).tolist() == [1.0, 3.0]  # room: unmoved


def test_gpu_count_shades_are_far_apart():
    """4x and 8x of one GPU were nearly the same colour (figure1_scaling_all_configurations)."""
    from matplotlib.colors import to_rgb

    def lightness(color: str) -> float:
        return float(np.mean(to_rgb(color)))

    shades = [lightness(color_for("RTX-4090", n)) for n in sorted(COUNT_SHADES)]
    assert all(np.diff(shades) < -0.1), shades  # darker with more GPUs, each step visible
