"""The paper's SLO-capacity table comes from the simulator (issue 10, item 5 and "Done when"):
a value in every configuration × SLO row, no capacity below the best measured throughput, the
steady-state rate (issue 18 item 1) with the paper protocol's beside it, and the simulated
percentile beside the measured one at every measured rate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hgresearch.paths import REPO_ROOT
from hgresearch.sim.calibrate import StepCoefficients, replica_for
from hgresearch.sim.slo_rate import (
    DEFAULT_SLO_LIMITS_MS,
    DEFAULT_SLO_METRICS,
    agreement_table,
    measured_agreement,
)
from hgresearch.sim.validation import configuration_points

TABLES = REPO_ROOT / "paper" / "tables"


@pytest.fixture(scope="module")
def configurations(reference_dir):
    """Measured points per configuration of everything the simulator is calibrated on."""
    from hgresearch.sim.run import calibration_runs

    return dict(configuration_points(calibration_runs(reference_dir)))


def test_committed_slo_table_has_a_value_in_every_row_and_no_capacity_below_measured(
        configurations):
    table = pd.read_csv(TABLES / "sim_slo_capacity.csv")
    num_slos = len(DEFAULT_SLO_LIMITS_MS) * len(DEFAULT_SLO_METRICS)
    assert sorted(table.configuration.unique()) == sorted(configurations)
    assert (table.groupby("configuration").slo.nunique() == num_slos).all()
    assert len(table) == len(configurations) * num_slos
    assert table.slo_rate_qps.notna().all() and table.capacity_rps.notna().all()
    best = {label: float(pts.request_throughput_rps.max())
            for label, pts in configurations.items()}
    np.testing.assert_allclose(table.best_measured_rps, table.configuration.map(best),
                               rtol=1e-5)
    assert (table.capacity_rps >= table.best_measured_rps).all()
    assert (table.slo_rate_qps <= table.capacity_rps * (1 + 1e-9)).all()
    # steady state (issue 18 item 1): the slow end never above the nominal rate, the paper
    # protocol's 200-request transient kept beside it under its own name, and the rate no
    # longer pinned to the burst throughput in most rows
    assert (table.slo_rate_low_qps <= table.slo_rate_qps * (1 + 1e-9)).all()
    assert (table.slo_rate_high_qps == table.slo_rate_qps).all()
    assert table.paper_protocol_rate_qps.notna().all()
    assert (table.limited_by == "capacity").mean() < 0.2
    priced = ~table.configuration.str.endswith("CPU")
    assert table.loc[priced & (table.slo_rate_qps > 0), "cost_usd_per_1m_tok"].notna().all()
    # One SLO-capacity table: the curve fits' is no longer written (notebook 04).
    assert not (TABLES / "models_slo_capacity.csv").exists()


def test_committed_agreement_table_covers_every_measured_point(configurations):
    table = pd.read_csv(TABLES / "sim_slo_agreement.csv", keep_default_na=False)
    expected = {(label, float(rate), metric) for label, pts in configurations.items()
                for rate in pts.request_rate_qps for metric in DEFAULT_SLO_METRICS}
    got = set(zip(table.configuration, table.request_rate_qps.astype(float), table.metric,
                  strict=True))
    assert got == expected
    for row in table.itertuples():
        measured = configurations[row.configuration]
        point = measured[np.isclose(measured.request_rate_qps, row.request_rate_qps)].iloc[0]
        assert row.measured_ms == pytest.approx(float(point[row.metric]), rel=1e-5)
        # verdicts_agree and disagree_at_ms count the same limits
        limits = [float(v) for v in str(row.disagree_at_ms).split()]
        agree, total = (int(v) for v in row.verdicts_agree.split("/"))
        assert total == len(DEFAULT_SLO_LIMITS_MS) and agree == total - len(limits)
        for limit in limits:  # a disagreement means the limit lies between the two
            assert min(row.measured_ms, row.simulated_ms) <= limit * (1 + 1e-6)
            assert max(row.measured_ms, row.simulated_ms) >= limit * (1 - 1e-6)


def test_agreement_table_counts_verdicts_per_point():
    """Constructed: a replica whose 'measurement' is its own simulation agrees everywhere;
    shifting one measured p90 across a limit makes exactly that limit disagree."""
    from hgresearch.sim.calibrate import Calibration, simulate_summary
    from hgresearch.sim.replay import reference_workload

    replica = replica_for("DeepSeek-R1-Distill-Qwen-14B", "H100-PCIe", 1)
    coefficients = StepCoefficients(0.018, 3e-5, 1.5e-4, 0.004)
    fit = Calibration(replica=replica, coefficients=coefficients, rel_se=(0.0, 0.0, 0.0),
                      rates_qps=(2.0,), rms_log_error=0.0, num_simulations=0)
    rows = []
    for rate in (2.0, 8.0):
        workload = reference_workload(rate, 200, 200.0, 180.0)
        rows.append({"request_rate_qps": rate, "completed": 200,
                     "total_input_tok": int(workload.prompt_tokens.sum()),
                     "total_output_tok": int(workload.output_tokens.sum()),
                     **simulate_summary(replica, coefficients, workload)})
    points = pd.DataFrame(rows)
    label = replica.label
    table = agreement_table(measured_agreement({label: fit}, {label: points}))
    assert len(table) == 2 * len(DEFAULT_SLO_METRICS)
    assert (table.verdicts_agree == f"{len(DEFAULT_SLO_LIMITS_MS)}/"
            f"{len(DEFAULT_SLO_LIMITS_MS)}").all()
    np.testing.assert_allclose(table.simulated_ms, table.measured_ms, rtol=0.02)
    simulated_p90 = float(table.simulated_ms[(table.request_rate_qps == 2.0)
                                             & (table.metric == "p90_ttft_ms")].iloc[0])
    limit = min(v for v in DEFAULT_SLO_LIMITS_MS if v > simulated_p90)
    points.loc[0, "p90_ttft_ms"] = limit * 1.5
    shifted = agreement_table(measured_agreement({label: fit}, {label: points}))
    row = shifted[(shifted.request_rate_qps == 2.0) & (shifted.metric == "p90_ttft_ms")].iloc[0]
    assert row.disagree_at_ms == f"{limit:g}"
    held_out = pd.DataFrame([{"configuration": label, "held_out_qps": 2.0,
                              "metric": "p90_ttft_ms", "predicted": 123.0}])
    merged = agreement_table(measured_agreement({label: fit}, {label: points}), held_out)
    assert merged.held_out_ms.notna().sum() == 1


def test_slo_table_slow_end_is_the_callers_factor_and_reads_no_build_folder(
        tmp_path, monkeypatch) -> None:
    """The slow end comes from the ``step_time_factor`` given (the calibration's own held-out
    error): factor 1 gives the nominal rate, a larger one a lower rate; and the table never
    reaches for the reference cross-validation in ``./build`` (it once did, whatever build
    folder its caller used)."""
    import hgresearch.sim.intervals as intervals
    from hgresearch.sim.calibrate import Calibration, simulate_summary
    from hgresearch.sim.replay import reference_workload
    from hgresearch.sim.slo_rate import slo_rate_table

    def refuse(*args, **kwargs):
        raise AssertionError("slo_rate_table read the reference intervals")

    monkeypatch.setattr(intervals, "reference_intervals", refuse)
    monkeypatch.chdir(tmp_path)
    replica = replica_for("DeepSeek-R1-Distill-Qwen-14B", "H100-PCIe", 1)
    coefficients = StepCoefficients(0.018, 3e-5, 1.5e-4, 0.004)
    fit = Calibration(replica=replica, coefficients=coefficients, rel_se=(0.0, 0.0, 0.0),
                      rates_qps=(2.0,), rms_log_error=0.0, num_simulations=0)
    workload = reference_workload(4.0, 200, 200.0, 180.0)
    points = pd.DataFrame([{"request_rate_qps": 4.0, "completed": 200,
                            "total_input_tok": int(workload.prompt_tokens.sum()),
                            "total_output_tok": int(workload.output_tokens.sum()),
                            "request_throughput_rps": 3.9,
                            **simulate_summary(replica, coefficients, workload)}])
    label = replica.label
    tables = {factor: slo_rate_table({label: fit}, {label: points}, slo_limits_ms=(300.0,),
                                     slo_metrics=("p90_ttft_ms",), step_time_factor=factor)
              for factor in (1.0, 1.3)}
    nominal, slow = tables[1.0].iloc[0], tables[1.3].iloc[0]
    assert nominal.slo_rate_low_qps == nominal.slo_rate_qps > 0
    assert slow.slo_rate_qps == nominal.slo_rate_qps
    assert 0 < slow.slo_rate_low_qps < 0.9 * slow.slo_rate_qps
    assert not (tmp_path / "build").exists()
    with pytest.raises(ValueError, match="step_time_factor"):
        slo_rate_table({label: fit}, {label: points}, step_time_factor=0.9)
