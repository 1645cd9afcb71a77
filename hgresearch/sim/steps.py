"""Engine steps reconstructed from per-token arrival times, and a step-time fit on them.

A streaming client records when each token of each request arrived (``requests.jsonl``:
``event_t_ns``, ``event_tokens``; :mod:`hgresearch.data.runfolder`). vLLM emits the tokens of
one engine step together: every running request that produced a token in the step gets it at
the step's end, and the server then writes them to the requests' streams one after the other.
So a step shows up at the client as a burst of events of *different* requests, and the next
step as the next burst. :func:`reconstruct_steps` groups the events into steps:

* **A request has at most one event per step** (one token per step, without speculative
  decoding; a coalesced event, ``event_tokens`` > 1, carries the tokens of several steps and
  stands for the last of them). The event of a request already seen in the open step opens
  the next one.
* **A request that decoded in the previous step and has tokens left must appear in this step**
  (vLLM V1 schedules every running request every step; only a preemption pauses one). While
  such a request is still missing, the step stays open whatever the gap: the server's
  delivery of one step's tokens pauses for milliseconds at large batches (measured: up to
  9 ms inside one step of 50 requests at 32 req/s on the CPU server), longer than a whole
  step at low load, so a gap threshold alone splits steps there.
* **Otherwise a gap longer than a threshold closes the step** (an idle engine, or a step whose
  requests all finished). The threshold splits the log-gap distribution into its two modes,
  within-step gaps (µs: one write per request) and between-step gaps (ms: the step time), at
  the cut that maximises the between-class variance (Otsu's method on log10 gaps;
  :func:`gap_threshold_ns`).

Per step the reconstruction gives its first and last event (ns), the requests that decoded
(``decode_seqs``), the prompt tokens of the requests whose first token it emitted
(``prefill_tokens``; the client knows the prompt length, not the prefix-cache hits), the KV
tokens its attention read (the simulator's definition: context after the step, summed) and
its duration: first event to first event, kept only where the engine did not idle in between
(``back_to_back``: some request of the step also had a token in the previous one, and a
running request is scheduled in every step).

What the client cannot see: steps that emit no token (the earlier chunks of a chunked prefill),
and, where events are coalesced, the steps in between (their tokens are attributed back to
them). The server's ``vllm:iteration_tokens_total`` counts only steps that emit tokens too
(vLLM records iteration stats only for steps with outputs), so :func:`step_check_table` compares
like with like (docs/simulator.md, "Steps from token timestamps").

:func:`fit_step_times` fits the calibration's step-time model (:mod:`hgresearch.sim.calibrate`:
``t = c0·(1 + ρ·kv) + c_prefill·prefill + c_decode·decode``) to the steps' durations directly —
thousands of constraints per run instead of a handful of summaries — with a robust loss on
log-errors, and intervals from a bootstrap over runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.errors import InputError
from hgresearch.sim.calibrate import (
    LOWER,
    ROBUST_SCALE,
    UPPER,
    Replica,
    StepCoefficients,
    coefficient_lower_bounds,
)

#: Columns of a reconstructed steps table (one row per step).
STEP_COLUMNS = ["step", "first_event_ns", "last_event_ns", "duration_s", "back_to_back",
                "decode_seqs", "prefill_tokens", "first_tokens", "kv_tokens", "output_tokens"]
#: Bootstrap resamples (over runs) of the step-time fit's intervals, and their level.
BOOTSTRAP_REPS = 200
INTERVAL_LEVEL = 0.95
#: Threshold used when a run has too few gaps to estimate one (ns): 0.5 ms, between the
#: within-step gaps (µs) and step times (ms) of every run measured so far.
DEFAULT_GAP_THRESHOLD_NS = 500_000.0
#: Gaps at or below this are the same write burst whatever the threshold says (ns).
_MIN_GAP_NS = 1.0


@dataclass(frozen=True)
class StepReconstruction:
    """The steps of one run (:data:`STEP_COLUMNS`) and how they were found."""

    steps: pd.DataFrame
    gap_threshold_ns: float
    num_events: int
    num_coalesced_events: int
    num_requests: int


def gap_threshold_ns(gaps_ns: np.ndarray) -> float:
    """The gap (ns) separating within-step from between-step gaps: Otsu's threshold on the
    log10 of the positive gaps (the cut maximising the between-class variance of a 200-bin
    histogram); :data:`DEFAULT_GAP_THRESHOLD_NS` when there are fewer than 20 gaps."""
    gaps = np.asarray(gaps_ns, dtype=float)
    gaps = gaps[gaps > _MIN_GAP_NS]
    if len(gaps) < 20:
        return DEFAULT_GAP_THRESHOLD_NS
    logs = np.log10(gaps)
    counts, edges = np.histogram(logs, bins=200)
    centres = 0.5 * (edges[1:] + edges[:-1])
    weight = np.cumsum(counts)
    total = weight[-1]
    mean_below = np.cumsum(counts * centres)
    best, cut = -1.0, float(np.median(logs))
    for i in range(len(counts) - 1):
        w0, w1 = weight[i], total - weight[i]
        if w0 == 0 or w1 == 0:
            continue
        m0 = mean_below[i] / w0
        m1 = (mean_below[-1] - mean_below[i]) / w1
        between = w0 * w1 * (m0 - m1) ** 2
        if between > best:
            best, cut = between, float(edges[i + 1])
    return float(10.0 ** cut)


def _events(requests: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """Every token event of the successful, non-warm-up requests, in time order: time (ns),
    request position, tokens it carries, token index of its last token, whether it is the
    request's last event, and the request's prompt tokens."""
    ok = requests[requests.success.astype(bool) & ~requests.warmup.astype(bool)]
    times: list[np.ndarray] = []
    owner: list[np.ndarray] = []
    tokens: list[np.ndarray] = []
    for position, (events, counts) in enumerate(zip(ok.event_t_ns, ok.event_tokens,
                                                    strict=True)):
        if not isinstance(events, (list, np.ndarray)) or len(events) == 0:
            continue
        t = np.asarray(events, dtype="int64")
        m = (np.asarray(counts, dtype="int64") if isinstance(counts, (list, np.ndarray))
             and len(counts) == len(t) else np.ones(len(t), dtype="int64"))
        times.append(t)
        owner.append(np.full(len(t), position))
        tokens.append(np.maximum(m, 1))
    if not times:
        raise InputError("no per-token timestamps (event_t_ns) in this run: steps cannot be "
                         "reconstructed", field="event_t_ns")
    t_all = np.concatenate(times)
    own = np.concatenate(owner)
    tok = np.concatenate(tokens)
    last_token = np.concatenate([np.cumsum(m) - 1 for m in tokens])
    is_last = np.concatenate([np.arange(len(m)) == len(m) - 1 for m in tokens])
    prompts = ok.prompt_tokens.to_numpy(dtype="float64")
    order = np.lexsort((last_token, t_all))
    return (t_all[order], own[order], tok[order], last_token[order], is_last[order],
            np.nan_to_num(prompts, nan=0.0))


def reconstruct_steps(requests: pd.DataFrame, *,
                      threshold_ns: float | None = None) -> StepReconstruction:
    """Group a run's token events into engine steps (see the module docstring).

    Args:
        requests: the run's requests table (:func:`hgresearch.data.runfolder.read_requests`
            or an ingested requests table of one run) with ``event_t_ns`` per request.
        threshold_ns: the gap that may close a step; default :func:`gap_threshold_ns` of the
            run's gaps.

    Raises:
        InputError: when no request has per-token timestamps.
    """
    t, owner, tokens, last_token, is_last, prompts = _events(requests)
    threshold = (gap_threshold_ns(np.diff(t)) if threshold_ns is None else float(threshold_ns))
    step_of = np.empty(len(t), dtype="int64")
    step = 0
    current: set[int] = set()
    continuing: set[int] = set()  # requests of the open step with tokens left
    expected: set[int] = set()    # requests of the previous step with tokens left
    late: set[int] = set()        # expected in the step just closed, but not seen in it
    previous = t[0]
    for i in range(len(t)):
        r = int(owner[i])
        if r in late and tokens[i] > 1:
            late.discard(r)  # coalesced: it carries the missing token and this step's
        elif r in late:
            # Its token of the previous step, delivered after the next step's first ones (the
            # server's writes to different streams can overtake each other): it belongs there.
            late.discard(r)
            step_of[i] = step - 1
            if not is_last[i]:
                expected.add(r)
            continue
        # A first token after a gap still belongs to the open step while that step has requests
        # that go on: vLLM emits a step's running requests before the ones it just admitted, so
        # the next step cannot start with a newly admitted request.
        starts = last_token[i] - tokens[i] < 0
        if current and (r in current or (t[i] - previous > threshold and expected <= current
                                         and not (starts and continuing))):
            step += 1
            late = expected - current
            expected, current, continuing = continuing, set(), set()
        current.add(r)
        if not is_last[i]:
            continuing.add(r)
        step_of[i] = step
        previous = t[i]
    num_steps = step + 1
    first_ns = np.full(num_steps, np.iinfo("int64").max, dtype="int64")
    last_ns = np.zeros(num_steps, dtype="int64")
    np.minimum.at(first_ns, step_of, t)
    np.maximum.at(last_ns, step_of, t)
    decode = np.zeros(num_steps)
    prefill = np.zeros(num_steps)
    first_tokens = np.zeros(num_steps)
    kv = np.zeros(num_steps)
    output = np.zeros(num_steps)
    members: list[set[int]] = [set() for _ in range(num_steps)]
    for i in range(len(t)):
        r = int(owner[i])
        # A coalesced event of m tokens: token j was produced m-1-(last-j) steps earlier.
        for j in range(int(last_token[i]) - int(tokens[i]) + 1, int(last_token[i]) + 1):
            k = int(step_of[i]) - (int(last_token[i]) - j)
            if k < 0:
                continue
            output[k] += 1
            members[k].add(r)
            if j == 0:
                prefill[k] += prompts[r]
                first_tokens[k] += 1
                kv[k] += prompts[r]
            else:
                decode[k] += 1
                kv[k] += prompts[r] + j
    back_to_back = np.array([k > 0 and bool(members[k] & members[k - 1])
                             for k in range(num_steps)])
    duration_s = np.full(num_steps, np.nan)
    duration_s[1:] = np.diff(first_ns) / 1e9
    duration_s[~back_to_back] = np.nan
    frame = pd.DataFrame({"step": np.arange(num_steps), "first_event_ns": first_ns,
                          "last_event_ns": last_ns, "duration_s": duration_s,
                          "back_to_back": back_to_back, "decode_seqs": decode.astype("int64"),
                          "prefill_tokens": prefill.astype("int64"),
                          "first_tokens": first_tokens.astype("int64"),
                          "kv_tokens": kv.astype("int64"), "output_tokens": output.astype("int64")})
    return StepReconstruction(steps=frame[STEP_COLUMNS], gap_threshold_ns=threshold,
                              num_events=len(t), num_coalesced_events=int((tokens > 1).sum()),
                              num_requests=int(len(set(owner.tolist()))))


def has_token_timestamps(requests: pd.DataFrame) -> bool:
    """Whether the successful requests of a run carry per-token arrival times."""
    if requests.empty or "event_t_ns" not in requests:
        return False
    ok = requests[requests.success.fillna(False).astype(bool)]
    return bool(len(ok)) and all(isinstance(e, (list, np.ndarray)) and len(e) > 0
                                 for e in ok.event_t_ns)


# ---------------------------------------------------------------------------------------------
# Against the server's counters
# ---------------------------------------------------------------------------------------------

def server_step_counters(run_dir: str | Path) -> dict[str, float] | None:
    """The server's own step accounting of a run folder (``server_metrics.json``): engine
    steps that emitted tokens (``vllm:iteration_tokens_total`` count), the tokens they
    processed (its sum: computed prompt tokens, i.e. without prefix-cache hits, plus generated
    tokens), prompt and generation tokens, preemptions; None when the run has none."""
    from hgresearch.data.runfolder import read_server_metrics

    metrics = read_server_metrics(run_dir)
    server = (metrics or {}).get("server") or {}
    engine = server.get("engine") or {}
    if engine.get("steps") is None:
        return None
    return {"steps": float(engine["steps"]), "step_tokens": float(engine["step_tokens"]),
            "prompt_tokens": float(server.get("prompt_tokens") or math.nan),
            "generation_tokens": float(server.get("generation_tokens") or math.nan),
            "preemptions": float(engine.get("preemptions") or 0.0)}


def step_check_row(run_dir: str | Path) -> dict[str, Any]:
    """One run folder's reconstructed steps against the server's counters (see
    :func:`step_check_table`)."""
    from hgresearch.data.runfolder import read_config, read_requests, read_server_kv_cache

    run_dir = Path(run_dir)
    requests = read_requests(run_dir)
    rebuilt = reconstruct_steps(requests)
    server = server_step_counters(run_dir)
    if server is None:
        raise InputError("the run folder has no server step counters (server_metrics.json "
                         "with server.engine.steps)", file=str(run_dir))
    steps = rebuilt.steps
    rate = read_config(run_dir).get("config", {}).get("request_rate_qps")
    prompt = float(steps.prefill_tokens.sum())
    generated = float(steps.output_tokens.sum())
    return {
        "run": run_dir.as_posix(), "request_rate_qps": rate,
        "gap_threshold_ms": rebuilt.gap_threshold_ns / 1e6,
        "steps": len(steps), "server_steps": int(server["steps"]),
        "steps_error_pct": 100.0 * (len(steps) / server["steps"] - 1.0),
        "output_tokens": int(generated),
        "server_generation_tokens": int(server["generation_tokens"]),
        "step_tokens": int(prompt + generated), "server_step_tokens": int(server["step_tokens"]),
        "step_tokens_error_pct": 100.0 * ((prompt + generated) / server["step_tokens"] - 1.0),
        # The client's prompt tokens less the server's computed ones: prefix-cache hits.
        "implied_cached_prompt_tokens": int(prompt + generated - server["step_tokens"]),
        "full_block_prompt_tokens": _full_block_tokens(requests, read_server_kv_cache(run_dir)),
        "tokens_per_step": (prompt + generated) / len(steps),
        "server_tokens_per_step": server["step_tokens"] / server["steps"],
        "coalesced_events": rebuilt.num_coalesced_events,
        "server_preemptions": int(server["preemptions"]),
    }


def _full_block_tokens(requests: pd.DataFrame, kv: dict[str, Any] | None) -> int:
    """The most prompt tokens a warm prefix cache can serve: every full KV block of each prompt
    but the last token's (vLLM always computes at least one token), summed over the requests."""
    block = int((kv or {}).get("block_size") or 16)
    ok = requests[requests.success.astype(bool) & ~requests.warmup.astype(bool)]
    prompts = ok.prompt_tokens.to_numpy(dtype="int64")
    return int(((prompts - 1) // block * block).sum())


def step_check_table(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """Per run folder: reconstructed engine steps and their tokens against the server's
    counters (``server_metrics.json``): ``steps`` vs ``server_steps`` and the error (%),
    generated tokens (equal when every token was seen), prompt + generated tokens vs the
    server's ``step_tokens`` (the server leaves out prompt tokens served from its prefix cache,
    which the client cannot see: ``implied_cached_prompt_tokens``; at most
    ``full_block_prompt_tokens``, what a cache that has seen every prompt serves), and tokens per
    step."""
    return pd.DataFrame([step_check_row(d) for d in run_dirs])


# ---------------------------------------------------------------------------------------------
# Fitting step times to the steps
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StepFit:
    """Step-time coefficients fitted to reconstructed steps (the offset is not fitted here),
    their bootstrap interval (``low``/``high``, same order: c0, prefill, decode), the steps used
    and the fit's robust scale of log-errors (median absolute log-error)."""

    coefficients: StepCoefficients
    low: tuple[float, float, float]
    high: tuple[float, float, float]
    num_steps: int
    num_runs: int
    median_abs_log_error: float


def _design(steps: pd.DataFrame, replica: Replica) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``[1 + ρ·kv, prefill, decode]`` and durations (s) of the timed steps."""
    timed = steps[steps.back_to_back & (steps.duration_s > 0)]
    design = np.column_stack([1.0 + replica.kv_per_weight_byte * timed.kv_tokens.to_numpy(float),
                              timed.prefill_tokens.to_numpy(float),
                              timed.decode_seqs.to_numpy(float)])
    return design, timed.duration_s.to_numpy(float)


def _fit_log(design: np.ndarray, durations: np.ndarray, lower: np.ndarray, upper: np.ndarray,
             x0: np.ndarray) -> np.ndarray:
    """Log-space coefficients minimising the soft-L1 loss of the steps' log-errors, each step
    weighted by its share of the time (a summary such as TPOT or a run's duration is a sum of
    step times, so long steps matter in proportion). The weights come from a first, unweighted
    fit's predicted durations: weighting by the measured ones would favour steps measured long
    and bias every coefficient up."""
    from scipy.optimize import least_squares

    log_t = np.log(durations)
    x = np.clip(x0, lower + 1e-9, upper - 1e-9)
    weight = np.ones(len(durations))
    for _ in range(2):
        def residuals(x: np.ndarray, weight: np.ndarray = weight) -> np.ndarray:
            errors: np.ndarray = weight * (np.log(design @ np.exp(x)) - log_t)
            return errors

        x = least_squares(residuals, x, bounds=(lower, upper), loss="soft_l1",
                          f_scale=ROBUST_SCALE).x
        predicted = design @ np.exp(x)
        weight = np.sqrt(predicted / predicted.mean())
    fitted: np.ndarray = x
    return fitted


def fit_step_times(replica: Replica, runs: Sequence[pd.DataFrame], *,
                   bootstrap_reps: int = BOOTSTRAP_REPS, seed: int = 0) -> StepFit:
    """Fit ``c0``, ``c_prefill`` and ``c_decode`` (the offset stays 0: it is outside the
    steps) to the timed steps of ``runs`` (one :func:`reconstruct_steps` table per run).

    The loss is soft-L1 on log-errors (scale :data:`hgresearch.sim.calibrate.ROBUST_SCALE`), so
    a step timed wrong by a delivery hiccup counts little; coefficients are bounded as the
    summary calibration bounds them (:func:`~hgresearch.sim.calibrate.coefficient_lower_bounds`).
    Interval: percentiles of ``bootstrap_reps`` refits on runs resampled with replacement (the
    runs differ in load, so this includes how much the mix of loads decides the fit; steps of
    one run are not independent and are never resampled alone).

    Raises:
        InputError: when fewer than 10 steps are timed.
    """
    parts = [_design(steps, replica) for steps in runs]
    design = np.vstack([p[0] for p in parts]) if parts else np.zeros((0, 3))
    durations = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    if len(durations) < 10:
        raise InputError(f"only {len(durations)} back-to-back steps to fit (need 10): the runs "
                         "are too short or their tokens carry no timestamps",
                         field="event_t_ns")
    lower = np.log(np.array(coefficient_lower_bounds(replica)))
    upper = np.log(np.array(UPPER[:3]))
    c0 = float(np.median(durations[design[:, 1] == 0])) if (design[:, 1] == 0).any() \
        else float(np.median(durations))
    x0 = np.log(np.array([max(0.5 * c0, LOWER[0]), max(c0 / 2000.0, LOWER[1]),
                          max(c0 / 50.0, LOWER[2])]))
    x = _fit_log(design, durations, lower, upper, x0)
    c = np.exp(x)
    low, high = np.full(3, np.nan), np.full(3, np.nan)
    if len(parts) > 1 and bootstrap_reps > 0:
        from hgresearch.data.summary import bootstrap_intervals

        def refits(picks: np.ndarray) -> np.ndarray:
            """The coefficients refitted on each resample of runs (one column each)."""
            out = np.full((3, len(picks)), np.nan)
            for j, pick in enumerate(picks):
                t = np.concatenate([parts[i][1] for i in pick])
                if len(t) >= 10:
                    d = np.vstack([parts[i][0] for i in pick])
                    out[:, j] = np.exp(_fit_log(d, t, lower, upper, x))
            return out

        intervals = bootstrap_intervals(refits, len(parts), bootstrap_reps, seed,
                                        INTERVAL_LEVEL)
        for k, interval in enumerate(intervals):
            if interval is not None:
                low[k], high[k] = interval
    log_errors = np.log(design @ c) - np.log(durations)
    return StepFit(coefficients=StepCoefficients(float(c[0]), float(c[1]), float(c[2])),
                   low=(float(low[0]), float(low[1]), float(low[2])),
                   high=(float(high[0]), float(high[1]), float(high[2])),
                   num_steps=len(durations), num_runs=len(parts),
                   median_abs_log_error=float(np.median(np.abs(log_errors))))
