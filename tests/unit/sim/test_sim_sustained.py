"""The sustained-load check: its steady window on tables built by hand, and on the committed
vLLM-CPU experiment (calibrated on the short runs, compared with the long ones)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hgresearch.data.runfolder import requests_table
from hgresearch.errors import InputError
from hgresearch.sim.sustained import sustained_check, sustained_summary, window_metrics

REPO = Path(__file__).resolve().parents[3]
EXPERIMENT = REPO / "data" / "raw" / "cpu-steady"


def _table(sent_s: np.ndarray, ttft_s: np.ndarray, e2e_s: np.ndarray, tokens: int = 11
           ) -> pd.DataFrame:
    records = []
    for i, (sent, ttft, e2e) in enumerate(zip(sent_s, ttft_s, e2e_s, strict=True)):
        sent_ns = round(sent * 1e9)
        records.append({
            "index": i, "warmup": False, "segment": 0, "segment_start_ns": 0,
            "t_scheduled_ns": sent_ns, "t_sent_ns": sent_ns, "cap_wait_ns": 0,
            "t_first_token_ns": sent_ns + round(ttft * 1e9),
            "t_last_token_ns": sent_ns + round(e2e * 1e9), "t_done_ns": sent_ns + round(e2e * 1e9),
            "prompt_tokens": 100, "output_tokens": tokens, "expected_output_tokens": tokens,
            "usage_source": "server", "http_status": 200, "success": True})
    return requests_table(records)


def test_window_drops_the_warm_up_and_counts_completions_in_the_window() -> None:
    sent = np.arange(0.0, 200.0, 0.5)  # 2 req/s for 200 s
    # Slow first minute (a warm-up transient), then steady: TTFT 100 ms, E2E 1.1 s.
    ttft = np.where(sent < 60, 0.3, 0.1)
    e2e = ttft + 1.0
    metrics = window_metrics(_table(sent, ttft, e2e), warmup_s=60.0)
    assert metrics["p90_ttft_ms"] == pytest.approx(100.0, abs=0.01)
    assert metrics["mean_tpot_ms"] == pytest.approx(100.0, abs=0.01)  # 1 s over 10 gaps
    assert metrics["request_throughput_rps"] == pytest.approx(2.0, rel=0.02)
    assert metrics["window_requests"] == pytest.approx(np.sum(sent >= 60))


def test_a_run_shorter_than_the_warm_up_is_refused() -> None:
    sent = np.arange(0.0, 30.0, 0.5)
    with pytest.raises(InputError, match="too short"):
        window_metrics(_table(sent, sent * 0 + 0.1, sent * 0 + 1.0), warmup_s=60.0)


@pytest.mark.slow
def test_committed_cpu_experiment_throughput_is_predicted_within_goal() -> None:
    protocol = sorted(p.parent for p in (EXPERIMENT / "protocol").rglob("summary.json"))
    long_runs = sorted(p.parent for p in (EXPERIMENT / "long").rglob("summary.json"))
    assert len(protocol) >= 10 and len(long_runs) >= 3
    check = sustained_check(protocol, long_runs, methods=("summaries",))
    summary = sustained_summary(check).set_index("metric")
    # Every long run is compared on every metric; intervals are finite and ordered.
    assert len(check.rows) == 4 * len(long_runs)
    assert (check.rows.low <= check.rows.high).all()
    # Below saturation the completion rate follows the offered rate; a simulator that
    # saturates early (as one calibrated on a slow first run did) fails this.
    assert summary.loc["request_throughput_rps", "mape_pct"] <= 5.0
