"""One definition of each formula, key set and label: each lives in one module and every caller uses it.

Every table builder that shows a cost must charge every GPU of every replica; the
bootstraps behind the tables must be :func:`hgresearch.data.summary.bootstrap_intervals`; the
configuration keys and the hardware label must come from :mod:`hgresearch.identity`. The last
test scans the package so that a copy of a formula cannot creep back unnoticed.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from energy_fixtures import make_run_folder
from fit_fixtures import synthetic_runs

from hgresearch import identity as keys
from hgresearch.accounting import carbon, costs, energy
from hgresearch.bench.sweep import SweepServer
from hgresearch.data import ingest
from hgresearch.data import summary as metrics
from hgresearch.fits import common
from hgresearch.fits.fit_all import fit_models
from hgresearch.fits.saturation import Schedule
from hgresearch.fits.slo import operating_curves
from hgresearch.fits.uncertainty import bootstrap_ci, bootstrap_request_cis, run_request_cis
from hgresearch.fits.validation import fitted_leave_one_qps_out
from hgresearch.paths import REPO_ROOT
from hgresearch.report.audit import capacity_comparisons

PACKAGE = REPO_ROOT / "hgresearch"


def _runs(replicas: int) -> pd.DataFrame:
    return pd.DataFrame([{"gpu_name": "RTX-4090", "gpu_count": 2, "replicas": replicas,
                          "duration_s": 1800.0, "total_input_tok": 200_000,
                          "total_output_tok": 300_000,
                          "total_token_throughput_tok_per_s": 500_000 / 1800.0}])


# --- cost -----------------------------------------------------------------------------------

def test_cost_formulas_by_hand():
    # 2 GPUs x 2 replicas x 0.5 h = 2 GPU-hours; at $0.25 -> $0.50; 500k tokens -> $1 per 1M
    assert costs.gpu_hours(1800.0, 2, 2) == pytest.approx(2.0)
    assert costs.run_cost_usd(1800.0, 2, 0.25, 2) == pytest.approx(0.5)
    assert costs.hourly_cost_usd(2, 0.25, 2) == pytest.approx(1.0)
    assert costs.cost_per_million_tok_usd(0.5, 500_000) == pytest.approx(1.0)
    # no tokens: missing, never infinite, for scalars, arrays and columns alike
    assert np.isnan(costs.cost_per_million_tok_usd(0.5, 0))
    assert np.isnan(costs.cost_per_million_tok_usd(0.5, np.array([0.0]))[0])
    assert np.isnan(costs.cost_per_million_tok_usd(0.5, pd.Series([0]))[0])
    # $1/h at 1000 tok/s = 3.6M tok/h
    assert costs.cost_per_million_tok_at_rate_usd(1000.0, 2, 0.25, 2) == pytest.approx(1 / 3.6)


def test_replicas_double_the_cost_of_the_runs_table():
    one, two = costs.add_costs(_runs(1)).iloc[0], costs.add_costs(_runs(2)).iloc[0]
    for column in ("gpu_hours", "cost_usd", "cost_usd_per_1m_tok",
                   "cost_usd_per_1m_output_tok"):
        assert two[column] == pytest.approx(2 * one[column]), column
    assert two.cost_usd == costs.run_cost_usd(1800.0, 2, two.price_usd_per_gpu_h, 2)


def test_replicas_double_the_bootstrapped_cost_of_our_runs(tmp_path):
    """models.uncertainty used to bill one replica whatever the run had."""
    requests = pd.DataFrame({"ttft_ms": np.linspace(10, 100, 50), "prompt_tokens": 100,
                             "output_tokens": 100})

    def cost(replicas: int) -> pd.Series:
        table = bootstrap_request_cis(requests, ["ttft_ms"], (90,), duration_s=3600,
                                      gpu_count=1, price_usd_per_gpu_h=1.0, replicas=replicas,
                                      n_boot=100)
        return table.set_index("quantity").loc["cost_usd_per_1m_tok"]

    assert cost(1).estimate == pytest.approx(costs.cost_per_million_tok_usd(1.0, 50 * 200))
    assert cost(2).estimate == pytest.approx(2 * cost(1).estimate)
    assert cost(2).high == pytest.approx(2 * cost(1).high)

    runs = ingest.read_runs(energy.run_summaries([make_run_folder(tmp_path / "run")]))

    def run_cost(replicas: int) -> float:
        cis = run_request_cis(runs.assign(replicas=replicas), 1.0, ("ttft_ms",), (50,),
                              n_boot=50)
        return float(cis.set_index("quantity").estimate["cost_usd_per_1m_tok"])

    assert run_cost(2) == pytest.approx(2 * run_cost(1))


def _priced_runs(replicas: int) -> pd.DataFrame:
    runs = synthetic_runs(mu=8.0, d0=6.0, noise=0.0).assign(replicas=replicas)
    runs["p90_ttft_ms"] = np.exp(np.log(40.0) + 2.0 * runs.request_rate_qps / 8.0)
    return costs.add_costs(runs)


def test_replicas_double_the_cost_of_the_models():
    def validation(replicas: int) -> pd.DataFrame:
        return fitted_leave_one_qps_out(_priced_runs(replicas), Schedule(0.95))

    one, two = validation(1), validation(2)
    assert two.cost_pred_usd_per_1m_tok.to_numpy() == pytest.approx(
        2 * one.cost_pred_usd_per_1m_tok.to_numpy())
    assert two.cost_obs_usd_per_1m_tok.to_numpy() == pytest.approx(
        2 * one.cost_obs_usd_per_1m_tok.to_numpy())

    def model_set(replicas: int):
        return fit_models(_priced_runs(replicas), metrics=("p90_ttft_ms",), form="loglinear",
                          schedule=Schedule(0.95))

    curve_one, curve_two = operating_curves(model_set(1)), operating_curves(model_set(2))
    assert curve_two.cost_usd_per_1m_tok.to_numpy() == pytest.approx(
        2 * curve_one.cost_usd_per_1m_tok.to_numpy())


def test_replicas_double_the_cost_at_fitted_capacity_in_the_audit():
    def fitted(replicas_4090: int) -> pd.Series:
        capacity = pd.DataFrame({"model": "m", "gpu_name": ["RTX-4090", "H100-PCIe"],
                                 "gpu_count": 1, "replicas": [replicas_4090, 1],
                                 "capacity_tok_per_s": [1000.0, 2000.0]})
        return capacity_comparisons(capacity).iloc[0]

    one, two = fitted(1), fitted(2)
    # $0.25/h at 1000 tok/s = 3.6M tok/h
    assert one.cost_usd_per_1m_tok == pytest.approx(0.25 / 3.6)
    assert two.cost_usd_per_1m_tok == pytest.approx(2 * one.cost_usd_per_1m_tok)
    assert two.cost_usd_per_1m_tok_h100 == one.cost_usd_per_1m_tok_h100
    assert two.hardware == "2 x (1x RTX-4090)"


# --- energy and carbon ----------------------------------------------------------------------

def test_energy_table_uses_the_energy_formulas_and_counts_replicas():
    one = energy.add_tdp_energy(_runs(1)).iloc[0]
    two = energy.add_tdp_energy(_runs(2)).iloc[0]
    tok_per_s = one.total_token_throughput_tok_per_s
    assert one.tdp_tok_per_kwh == energy.tokens_per_kwh(tok_per_s, 2 * 450.0)
    assert one.tdp_g_co2_per_1m_tok == energy.g_co2_per_1m_tok(one.tdp_tok_per_kwh, 242.0)
    assert two.tdp_power_w == 2 * one.tdp_power_w
    assert two.tdp_tok_per_kwh == pytest.approx(one.tdp_tok_per_kwh / 2)
    assert two.tdp_g_co2_per_1m_tok == pytest.approx(2 * one.tdp_g_co2_per_1m_tok)
    frame = pd.concat([_runs(1), _runs(2)], ignore_index=True).assign(model="m", dataset="d")
    modelled = energy.add_power_model(frame, load=pd.Series([1.0, 1.0]))
    assert modelled.model_tok_per_kwh_central.iloc[0] == energy.tokens_per_kwh(
        tok_per_s, modelled.model_power_central_w.iloc[0])
    assert modelled.model_power_central_w.iloc[1] == pytest.approx(
        2 * modelled.model_power_central_w.iloc[0])


def test_carbon_operational_part_is_the_energy_formula():
    configs = pd.DataFrame({"hardware": ["2x RTX-4090"], "gpu_name": ["RTX-4090"],
                            "gpu_count": [2], "replicas": [1], "request_rate_qps": [4.0],
                            "total_token_throughput_tok_per_s": [1000.0],
                            "tdp_energy_per_tok_j": [0.9]})
    row = carbon.configuration_carbon(configs, regions=["EU-27"]).iloc[0]
    tok_per_kwh = energy.tokens_per_kwh_of_energy(1.0, 0.9)
    assert tok_per_kwh == pytest.approx(4e6)  # 3.6 MJ / 0.9 J
    assert row.operational_g_per_1m_tok == energy.g_co2_per_1m_tok(tok_per_kwh,
                                                                   row.g_co2_per_kwh)
    assert row.kwh_per_1m_tok == energy.kwh_per_1m_tok(0.9) == pytest.approx(0.25)


# --- bootstrap ------------------------------------------------------------------------------

def test_bootstrap_intervals_by_hand_and_seeded():
    values = np.arange(10.0)
    [interval] = metrics.bootstrap_intervals(lambda idx: values[idx].mean(axis=1), 10, 400,
                                             seed=7)
    expected_idx = np.random.default_rng(7).integers(0, 10, size=(400, 10))
    expected = metrics.percentile_interval(values[expected_idx].mean(axis=1))
    assert interval == expected
    assert metrics.percentile_interval(np.array([np.nan, np.inf])) is None
    both = metrics.bootstrap_intervals(lambda idx: np.stack([values[idx].min(axis=1),
                                                             values[idx].max(axis=1)]), 10, 50)
    assert len(both) == 2 and both[0][1] <= both[1][0] + 9


def test_every_table_bootstrap_is_the_metrics_one(tmp_path):
    """Same seed, same resamples: the models' and the run summary's intervals equal the
    metrics helper's."""
    values = np.random.default_rng(0).exponential(100.0, 300)
    _, low, high = bootstrap_ci(values, lambda x: float(np.percentile(x, 90)), 200, seed=4)
    [expected] = metrics.bootstrap_intervals(
        lambda idx: np.percentile(values[idx], 90, axis=1), len(values), 200, seed=4)
    assert [low, high] == pytest.approx(expected, rel=1e-12)

    run = make_run_folder(tmp_path / "run")
    measured = energy.measure_run(run, n_boot=300, seed=2)
    assert "300 resamples, seed 2" in measured["measured_ci_method"]
    assert measured["measured_energy_per_tok_ci_low_j"] <= measured["measured_energy_per_tok_j"]
    assert measured["measured_energy_per_tok_j"] <= measured["measured_energy_per_tok_ci_high_j"]


# --- keys and labels ------------------------------------------------------------------------

def test_one_definition_of_keys_and_labels():
    assert common.CONFIG_KEYS is keys.CONFIG_KEYS
    assert common.config_label is keys.config_label
    assert ingest.POINT_KEYS is keys.POINT_KEYS and ingest.hardware_label is keys.hardware_label
    assert set(keys.CONFIG_KEYS) < set(keys.POINT_KEYS)
    assert keys.hardware_label("RTX-4090", 2) == "2x RTX-4090"
    assert keys.hardware_label("RTX-4090", 2, 4) == "4 x (2x RTX-4090)"
    assert keys.config_label({"model": "m", "gpu_name": "H100-PCIe", "gpu_count": 1,
                              "replicas": None}) == "m on 1x H100-PCIe"


def test_sweep_folder_name_is_the_hardware_label():
    from hgresearch.bench.server.vllm import VLLMServerConfig

    server = SweepServer(server=VLLMServerConfig(model="m"), gpu_name="RTX-4090", gpu_count=2)
    server.server.tensor_parallel_size = 2
    assert server.hardware_label == "2xRTX-4090"  # the folder names sweeps already wrote
    assert server.hardware_label == keys.hardware_label("RTX-4090", 2).replace(" ", "")
    server.server.tensor_parallel_size = 1
    assert server.hardware_label == "2xRTX-4090-tp1"


# --- no copies ------------------------------------------------------------------------------

#: (pattern, the one module allowed to contain it, what it would be a copy of)
ONE_DEFINITION = [
    (r"\b3600(\.0)?\b|3\.6e6|3\.6e-3", "units.py", "seconds per hour / joules per kWh"),
    (r"SECONDS_PER_HOUR\s*=|J_PER_KWH\s*=|TOKENS_PER_MILLION\s*=", "units.py", "unit constant"),
    (r"\.integers\(", "data/summary.py", "bootstrap resampling"),
    (r"np\.quantile\(", "data/summary.py", "percentile interval"),
    (r"\b(CONFIG_KEYS|POINT_KEYS)\s*=", "identity.py", "configuration keys"),
    (r"\"model\", \"dataset\", \"gpu_name\"|\"model\", \"gpu_name\", \"gpu_count\", \"tensor",
     "identity.py", "configuration keys"),
    (r"\}x \{", "identity.py", "hardware label"),
    (r"\} x \(", "identity.py", "replicated hardware label"),
    (r"gpu_count \* \w*\.?replicas", "identity.py",
     "GPUs of every replica"),
    (r"gpu_count\w* \* \w*price", "", "hourly cost"),
    (r"/ *\(\w*\.?\w*tok\w* */ *1e6\)", "", "cost or carbon per 1M tokens"),
]


@pytest.mark.parametrize(("pattern", "home", "what"), ONE_DEFINITION,
                         ids=[w for _, _, w in ONE_DEFINITION])
def test_no_copy_of_a_formula_outside_its_module(pattern, home, what):
    allowed = {h for h in home.split("|") if h}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        # prompts draws random prompts (rng.integers), which is no bootstrap
        if relative in allowed or relative.startswith("bench/prompts"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(pattern, line) and not line.lstrip().startswith("#"):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert not offenders, f"copy of the {what} formula outside {home or 'its function'}:\n" + \
        "\n".join(offenders)
