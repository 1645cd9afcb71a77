"""The routing comparison for the paper's hybrid question (issue 10, items 6 and 9):
1× H100 + N × (2× RTX-4090) under every routing policy, on calibrated replicas."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from hgresearch.errors import InputError
from hgresearch.report.figures.layout import layout_problems
from hgresearch.report.figures.sim import routing_comparison_figure
from hgresearch.sim import routing_study as study
from hgresearch.sim.calibrate import Calibration, StepCoefficients, replica_for
from hgresearch.sim.slo_rate import burst_throughput_rps
from hgresearch.traffic.routing import Policy

MEAN_TOKENS = 208.0


def _calibration(gpu: str, num_gpus: int, coefficients: StepCoefficients) -> Calibration:
    """A stand-in calibration with known coefficients (a real fit takes seconds per
    configuration and needs the reference data)."""
    return Calibration(replica=replica_for(study.HYBRID_MODEL, gpu, num_gpus),
                       coefficients=coefficients, rel_se=(0.0, 0.0, 0.0), rates_qps=(1.0,),
                       rms_log_error=0.0, num_simulations=0)


@pytest.fixture(scope="module")
def fits() -> dict[str, Calibration]:
    # Roughly the committed coefficients of the two configurations (sim_coefficients.csv).
    return {study.FAST_CONFIG: _calibration("H100-PCIe", 1, StepCoefficients(
                0.0168, 3.9e-5, 8.1e-5, 0.0)),
            study.SLOW_CONFIG: _calibration("RTX-4090", 2, StepCoefficients(
                0.0211, 2.5e-4, 3.9e-4, 0.2266))}


@pytest.fixture(scope="module")
def points() -> pd.DataFrame:
    return pd.DataFrame({"total_input_tok": [MEAN_TOKENS * 200], "completed": [200],
                         "total_output_tok": [MEAN_TOKENS * 200]})


@pytest.fixture(scope="module")
def small(fits, points) -> pd.DataFrame:
    return study.routing_comparison(fits, points, slow_counts=(1, 2), rates_qps=(4.0, 40.0),
                                    policies=("round-robin", "jsq"), seeds=(0, 1),
                                    num_prompts=80)


def test_comparison_is_tidy_and_deterministic(small, fits, points) -> None:
    # fleets × rates × policies × seeds, plus the H100 alone (one policy) × rates × seeds
    assert len(small) == 2 * 2 * 2 * 2 + 2 * 2
    assert not small.duplicated(["num_slow", "rate_qps", "policy", "seed"]).any()
    assert set(small.gpus) == {1, 3, 5}
    # Alternative prices: H100 $2.00/h, RTX 4090 $0.25/GPU-h.
    assert dict(zip(small.num_slow, small.price_usd_per_h, strict=False)) == {
        0: 2.0, 1: 2.5, 2: 3.0}
    alone = small[small.num_slow == 0]
    assert set(alone.policy) == {study.ALONE} and (alone.h100_share == 1.0).all()
    assert set(alone.fleet) == {"1x H100 alone"}
    again = study.routing_comparison(fits, points, slow_counts=(1, 2), rates_qps=(4.0, 40.0),
                                     policies=("round-robin", "jsq"), seeds=(0, 1),
                                     num_prompts=80)
    pd.testing.assert_frame_equal(small, again)
    # Seeds draw different arrivals and lengths.
    by_seed = small.set_index(["num_slow", "rate_qps", "policy", "seed"]).p99_ttft_ms
    assert (by_seed.xs(0, level="seed") != by_seed.xs(1, level="seed")).any()


def test_calibrated_request_path_delay_reaches_the_fleet(small) -> None:
    """Every request of the RTX 4090 pair carries its calibration's 226.6 ms delay, so with
    half the requests there (round-robin) the p90 TTFT cannot be below it (without the delay
    it is ~110 ms at 4 req/s)."""
    rr = small[(small.policy == "round-robin") & (small.num_slow == 1)]
    assert (rr.h100_share == 0.5).all()
    assert (rr.p90_ttft_ms >= 226.6).all()


def test_max_load_is_rate_times_share_over_sustained_capacity(small, fits) -> None:
    capacity = burst_throughput_rps(fits[study.SLOW_CONFIG], MEAN_TOKENS, MEAN_TOKENS)
    rr = small[(small.policy == "round-robin") & (small.num_slow == 1)]
    # Round-robin gives the pair half the requests; it is the more loaded replica.
    np.testing.assert_allclose(rr.max_load, rr.rate_qps * 0.5 / capacity)
    assert (rr[rr.rate_qps == 40.0].max_load > 1).all()  # 20 req/s to one pair: overloaded


def test_interval_spans_the_seeds(small) -> None:
    interval = study.seed_interval(small)
    assert len(interval) == 10 and (interval.seeds == 2).all()
    assert (interval.p99_ttft_low_ms <= interval.p99_ttft_ms).all()
    assert (interval.p99_ttft_ms <= interval.p99_ttft_high_ms).all()


def test_verdict_holds_up_to_the_first_failing_rate() -> None:
    """Constructed: a policy that fails at 8 req/s and passes again at 12 holds only up to 4;
    one that meets the latency but overloads a replica at 12 holds up to 8."""
    rows = []
    for policy, p99, load in (("jsq", [300, 600, 400], [0.2, 0.4, 0.6]),
                              ("round-robin", [300, 350, 400], [0.3, 0.8, 1.2]),
                              ("least-tokens", [700, 800, 900], [0.1, 0.2, 0.3])):
        for rate, p, m in zip((4.0, 8.0, 12.0), p99, load, strict=True):
            rows.append({"num_slow": 1, "fleet": "f", "gpus": 3, "price_usd_per_h": 2.5,
                         "rate_qps": rate, "policy": policy, "seeds": 3,
                         "request_throughput_rps": rate, "p99_ttft_ms": p,
                         "p99_ttft_low_ms": p - 10, "p99_ttft_high_ms": p + 10,
                         "max_load_high": m, "cost_usd_per_1m_tok": 1.0 / rate})
    verdicts = study.slo_verdicts(pd.DataFrame(rows), (500.0,)).set_index("policy")
    assert verdicts.max_rate_qps.to_dict() == {"jsq": 4.0, "round-robin": 8.0,
                                               "least-tokens": 0.0}
    assert verdicts.loc["round-robin", "cost_usd_per_1m_tok"] == pytest.approx(1 / 8)
    assert math.isnan(verdicts.loc["least-tokens", "p99_ttft_ms"])
    best = study.best_policies(study.slo_verdicts(pd.DataFrame(rows), (500.0,)))
    assert best.policies.tolist() == ["round-robin"] and best.max_rate_qps.tolist() == [8.0]


def test_comparison_needs_both_calibrations(fits, points) -> None:
    with pytest.raises(InputError, match="no calibration for .*2x RTX-4090"):
        study.routing_comparison({study.FAST_CONFIG: fits[study.FAST_CONFIG]}, points,
                                 slow_counts=(1,), rates_qps=(4.0,), seeds=(0,))


def test_cached_comparison_reuses_its_result(fits, points, tmp_path, monkeypatch) -> None:
    calls = []

    def stand_in(fits_, points_, **params):  # records the call instead of simulating
        calls.append(params)
        return pd.DataFrame({"rate_qps": [params["rates_qps"][0]]})

    monkeypatch.setattr(study, "routing_comparison", stand_in)
    params = {"slow_counts": (1,), "rates_qps": (4.0,), "seeds": (0,)}
    first = study.cached_routing_comparison(fits, points, tmp_path, **params)
    second = study.cached_routing_comparison(fits, points, tmp_path, **params)
    pd.testing.assert_frame_equal(first, second)
    assert len(calls) == 1
    study.cached_routing_comparison(fits, points, tmp_path, **{**params, "rates_qps": (8.0,)})
    assert len(calls) == 2  # another grid is another key


def test_routing_figure_is_readable(small) -> None:
    fig = routing_comparison_figure(study.seed_interval(small))
    try:
        assert layout_problems(fig) == []
        legend = {t.get_text() for t in fig.legends[0].get_texts()}
        assert {"round-robin", "jsq", "1× H100 alone", "p99 TTFT 500 ms",
                "p99 TTFT 2000 ms"} <= legend
        assert len(fig.axes) == 4  # one column per fleet with RTX pairs; the H100 in each
    finally:
        plt.close(fig)


def test_every_policy_is_compared_by_default() -> None:
    import inspect

    default = inspect.signature(study.routing_comparison).parameters["policies"].default
    assert {Policy(p) for p in default} == set(Policy)
