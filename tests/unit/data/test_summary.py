"""Run metrics follow vLLM benchmark_serving.py: checked against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hgresearch.data.runfolder import requests_table
from hgresearch.data.summary import describe, summarize

MS = 1_000_000  # ns per ms


def _rec(index, sent_ms, events, prompt=5, success=True, done_ms=None, error=None):
    """A recorded request: events are (arrival ms, tokens)."""
    times = [int(t * MS) for t, _ in events]
    tokens = [n for _, n in events]
    return {
        "index": index, "warmup": False, "segment": 0, "segment_start_ns": 0,
        "t_scheduled_ns": int(sent_ms * MS), "t_sent_ns": int(sent_ms * MS), "cap_wait_ns": 0,
        "t_first_token_ns": times[0] if times else None,
        "t_last_token_ns": times[-1] if times else None,
        "t_done_ns": int((done_ms if done_ms is not None else events[-1][0] + 1) * MS),
        "prompt_tokens": prompt, "output_tokens": sum(tokens), "expected_output_tokens": 3,
        "usage_source": "server", "http_status": 200 if success else 500,
        "success": success, "error_class": error, "error": error,
        "event_t_ns": times, "event_tokens": tokens,
    }


@pytest.fixture()
def recorded():
    """Four requests: three succeed (3, 3 and 1 output tokens), one fails (HTTP 500)."""
    return requests_table([
        _rec(0, 0, [(10, 1), (12, 1), (15, 1)], done_ms=16),   # TTFT 10, E2E 15, TPOT 2.5
        _rec(1, 100, [(120, 1), (124, 2)], done_ms=125),       # TTFT 20, E2E 24, TPOT 2
        _rec(2, 200, [(230, 1)], done_ms=231),                 # TTFT 30, one token: no TPOT
        _rec(3, 300, [], prompt=7, success=False, done_ms=301, error="http_error"),
    ])


def test_per_request_definitions(recorded):
    """TTFT, E2E and TPOT = (E2E - TTFT) / (output - 1) per request, by hand."""
    ok = recorded[recorded.success]
    assert ok.ttft_ms.tolist() == pytest.approx([10, 20, 30])
    assert ok.e2el_ms.tolist() == pytest.approx([15, 24, 30])
    assert ok.tpot_ms.iloc[:2].tolist() == pytest.approx([2.5, 2.0])
    assert math.isnan(ok.tpot_ms.iloc[2])


def test_summary_matches_hand_computed_values(recorded):
    """Every statistic below was worked out by hand (population std, linear percentiles)."""
    s = summarize(recorded, bootstrap_reps=0)
    assert s["sent"] == 4 and s["completed"] == 3 and s["failed"] == 1
    assert s["duration"] == pytest.approx(0.301)  # first send (0) to last finished (301 ms)
    assert s["total_input_tokens"] == 15  # successful requests only, as vLLM
    assert s["total_output_tokens"] == 7
    assert s["request_throughput"] == pytest.approx(3 / 0.301)
    assert s["output_throughput"] == pytest.approx(7 / 0.301)
    assert s["total_token_throughput"] == pytest.approx(22 / 0.301)
    # TTFT [10, 20, 30]
    assert s["mean_ttft_ms"] == pytest.approx(20)
    assert s["median_ttft_ms"] == pytest.approx(20)
    assert s["std_ttft_ms"] == pytest.approx(math.sqrt(200 / 3))
    assert s["p90_ttft_ms"] == pytest.approx(28)      # position 1.8 -> 20 + 0.8 * 10
    assert s["p99_ttft_ms"] == pytest.approx(29.8)
    assert s["p100_ttft_ms"] == pytest.approx(30)
    # TPOT [2.5, 2.0] (the one-token request has none)
    assert s["mean_tpot_ms"] == pytest.approx(2.25)
    assert s["std_tpot_ms"] == pytest.approx(0.25)
    assert s["p90_tpot_ms"] == pytest.approx(2.45)
    # ITL: one value per streamed gap: [2, 3, 4]
    assert s["mean_itl_ms"] == pytest.approx(3)
    assert s["p99_itl_ms"] == pytest.approx(3.98)
    assert s["std_itl_ms"] == pytest.approx(math.sqrt(2 / 3))
    # Token-weighted ITL: the 4 ms gap brought 2 tokens -> [2, 3, 2, 2]
    assert s["mean_itl_per_tok_ms"] == pytest.approx(2.25)
    assert s["p100_itl_per_tok_ms"] == pytest.approx(3)
    # E2E [15, 24, 30]
    assert s["mean_e2el_ms"] == pytest.approx(23)
    assert s["p50_e2el_ms"] == pytest.approx(24)
    assert s["request_goodput"] is None
    assert s["errors"] == {"http_error": 1}


def test_goodput_counts_requests_meeting_every_slo(recorded):
    """SLO TTFT <= 25 ms and TPOT <= 2.4 ms: only request 1 is good (vLLM: one-token TPOT 0)."""
    s = summarize(recorded, goodput_slo_ms={"ttft": 25, "tpot": 2.4}, bootstrap_reps=0)
    assert s["request_goodput"] == pytest.approx(1 / 0.301)
    s = summarize(recorded, goodput_slo_ms={"tpot": 2.4}, bootstrap_reps=0)
    assert s["request_goodput"] == pytest.approx(2 / 0.301)  # requests 1 and 2


def test_empty_sets_are_missing_not_zero():
    """vLLM writes 0 for a statistic of nothing; we write None."""
    assert describe([]) == dict.fromkeys(describe([1.0]))
    assert all(v is None for v in describe([]).values())


def test_schedule_lag_is_sent_minus_scheduled(recorded):
    table = requests_table([{**r, "t_sent_ns": r["t_scheduled_ns"] + 8 * MS}
                            for r in recorded.to_dict("records")])
    s = summarize(table, bootstrap_reps=0)
    assert s["schedule_lag_p99_ms"] == pytest.approx(8)


def _paced(scheduled_ms: list[float], lag_ms: list[float], cap_wait_ms: list[float] | None = None):
    """Requests scheduled at ``scheduled_ms``, each sent ``lag_ms`` (+ cap wait) later."""
    waits = cap_wait_ms or [0.0] * len(scheduled_ms)
    records = []
    for i, (at, lag, wait) in enumerate(zip(scheduled_ms, lag_ms, waits, strict=True)):
        sent = at + lag + wait
        rec = _rec(i, sent, [(sent + 10, 1), (sent + 12, 1), (sent + 14, 1)])
        rec.update(t_scheduled_ns=int(at * MS), cap_wait_ns=int(wait * MS))
        records.append(rec)
    return requests_table(records)


def test_one_late_send_in_forty_is_not_client_limited():
    """The calibration runs' pattern: 1 of 40 sent 30 ms late, the rest on time."""
    lags = [0.2] * 40
    lags[17] = 30.0
    s = summarize(_paced([100.0 * i for i in range(40)], lags), bootstrap_reps=0)
    assert s["schedule_lag_p99_ms"] > 5  # the old rule (lag p99 > 5 ms) flagged this run
    assert s["late_send_share"] == pytest.approx(1 / 40)
    assert s["realised_rate_ratio"] == pytest.approx(1.0)
    assert s["client_limited"] is False


def test_a_fifth_of_sends_late_is_client_limited():
    lags = [0.2] * 40
    for i in range(10, 18):
        lags[i] = 12.0
    s = summarize(_paced([100.0 * i for i in range(40)], lags), bootstrap_reps=0)
    assert s["late_send_share"] == pytest.approx(0.2)
    assert s["realised_rate_ratio"] == pytest.approx(1.0)
    assert s["client_limited"] is True


def test_a_realised_rate_short_of_the_offered_one_is_client_limited():
    """No send is more than 5 ms late, yet the client sends at 1/1.1 of the asked rate."""
    scheduled = [1.0 * i for i in range(41)]
    s = summarize(_paced(scheduled, [0.1 * t for t in scheduled]), bootstrap_reps=0)
    assert s["late_send_share"] == 0.0
    assert s["realised_rate_ratio"] == pytest.approx(1 / 1.1)
    assert s["client_limited"] is True


def test_concurrency_cap_waits_are_not_lateness():
    """A request held back by max_concurrency on purpose is neither late nor a slower rate."""
    scheduled = [100.0 * i for i in range(40)]
    waits = [0.0] * 30 + [500.0] * 10
    s = summarize(_paced(scheduled, [0.2] * 40, waits), bootstrap_reps=0)
    assert s["late_send_share"] == 0.0
    assert s["realised_rate_ratio"] == pytest.approx(1.0)
    assert s["client_limited"] is False


def test_all_at_once_has_no_rate_to_fall_short_of():
    """An infinite rate schedules every request at 0: the ratio is undefined (None)."""
    s = summarize(_paced([0.0] * 10, [0.5] * 10), bootstrap_reps=0)
    assert s["realised_rate_ratio"] is None
    assert s["client_limited"] is False


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    """Same seed -> same intervals; the interval contains the point estimate."""
    rng = np.random.default_rng(1)
    records = []
    for i in range(200):
        sent = i * 20.0
        ttft = float(rng.uniform(10, 30))
        records.append(_rec(i, sent, [(sent + ttft, 1), (sent + ttft + 5, 1)],
                            done_ms=sent + ttft + 6))
    table = requests_table(records)
    a = summarize(table, bootstrap_reps=300, bootstrap_seed=3)
    b = summarize(table, bootstrap_reps=300, bootstrap_seed=3)
    assert a["ci95_p50_ttft_ms"] == b["ci95_p50_ttft_ms"]
    lo, hi = a["ci95_p50_ttft_ms"]
    assert lo <= a["p50_ttft_ms"] <= hi and hi - lo < 5
    lo, hi = a["ci95_steady_request_throughput"]
    assert lo <= a["steady_request_throughput"] <= hi
    # Steady window: 10% ramp-up left out, ends at the last send.
    assert a["steady_start_ns"] == records[20]["t_sent_ns"]
    assert a["steady_end_ns"] == records[-1]["t_sent_ns"]
    assert a["steady_request_throughput"] == pytest.approx(50, rel=0.05)
