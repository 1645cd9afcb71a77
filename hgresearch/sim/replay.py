"""What a simulated run replays: arrival times and per-request lengths of a measured run.

* A run with per-request records (our run folders, :func:`hgresearch.data.runfolder.read_requests`)
  is replayed exactly: each request's send time (from the run start), prompt tokens and the
  output tokens it generated (:func:`replay_workload`).
* A run that kept only totals (the paper's result files, :func:`hgresearch.data.ingest.read_runs`)
  gets vLLM 0.8.5's seeded arrival times at its rate
  (:func:`hgresearch.traffic.arrivals.vllm085_send_offsets_s`, seed 42) and ShareGPT-like lengths
  whose
  totals equal the run's (:func:`hgresearch.traffic.lengths.sharegpt_like_lengths`): the paper's
  individual lengths are not known, only their means (:func:`reference_workload`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hgresearch.data.runfolder import read_requests
from hgresearch.errors import InputError
from hgresearch.traffic.arrivals import (
    PAPER_SEED,
    vllm085_arrival_gaps_s,
    vllm085_send_offsets_s,
)
from hgresearch.traffic.lengths import sharegpt_like_lengths

#: ``lengths_source`` of a workload replayed from per-request records.
REPLAYED = "replayed"
#: ``lengths_source`` of a workload drawn to match a run's token totals.
SHAREGPT_LIKE = "sharegpt_like"


@dataclass(frozen=True)
class Workload:
    """Requests of one (simulated) run.

    Attributes:
        arrivals_s: send time of each request, s from the first send.
        prompt_tokens, output_tokens: lengths of each request (tokens).
        min_duration_s: the shortest the run's measured duration can be whatever the server
            does (vLLM 0.8.5 also sleeps after the last send: the sum of all gaps; 0 for ours).
        lengths_source: :data:`REPLAYED` or :data:`SHAREGPT_LIKE`.
    """

    arrivals_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    min_duration_s: float
    lengths_source: str

    @property
    def num_requests(self) -> int:
        """Requests in the workload."""
        return len(self.arrivals_s)


def reference_workload(rate_qps: float, num_prompts: int, mean_prompt_tokens: float,
                       mean_output_tokens: float, *, seed: int = PAPER_SEED,
                       length_seed: int = 0) -> Workload:
    """The paper's protocol at ``rate_qps``: vLLM 0.8.5's arrivals (``seed``), ShareGPT-like
    lengths with the given means (``length_seed``)."""
    if not num_prompts >= 1:
        raise InputError(f"expected at least one request, got {num_prompts}",
                         field="num_prompts")
    if not rate_qps > 0:
        raise InputError(f"expected a request rate > 0, got {rate_qps}", field="qps")
    prompts, outputs = sharegpt_like_lengths(num_prompts, mean_prompt_tokens,
                                             mean_output_tokens, seed=length_seed)
    gaps = vllm085_arrival_gaps_s(rate_qps, num_prompts, seed=seed)
    return Workload(arrivals_s=vllm085_send_offsets_s(rate_qps, num_prompts, seed=seed),
                    prompt_tokens=prompts, output_tokens=outputs,
                    min_duration_s=float(gaps.sum()), lengths_source=SHAREGPT_LIKE)


def reference_run_workload(run: pd.Series | dict[str, Any], *, length_seed: int = 0
                           ) -> Workload:
    """:func:`reference_workload` for a row of the runs table: the means are
    ``total_input_tok / completed`` and ``total_output_tok / completed``."""
    completed = int(run["completed"])
    if completed < 1:
        raise InputError("a run with no completed request cannot be replayed",
                         field="completed")
    return reference_workload(float(run["request_rate_qps"]), completed,
                              float(run["total_input_tok"]) / completed,
                              float(run["total_output_tok"]) / completed,
                              length_seed=length_seed)


def replay_workload(requests: pd.DataFrame) -> Workload:
    """Replay a measured run's successful, non-warm-up requests exactly: send times relative to
    the first send (``t_sent_ns``: what the server saw), prompt and generated output tokens."""
    ok = requests[requests.success & ~requests.warmup.astype(bool)]
    if ok.empty:
        raise InputError("no successful request to replay", field="success")
    sent_ns = ok.t_sent_ns.to_numpy(dtype="int64")
    outputs = ok.output_tokens.to_numpy(dtype="int64")
    if (outputs < 1).any():
        raise InputError("a successful request generated no token", field="output_tokens")
    return Workload(arrivals_s=(sent_ns - sent_ns.min()) / 1e9,
                    prompt_tokens=ok.prompt_tokens.to_numpy(dtype="int64"),
                    output_tokens=outputs, min_duration_s=0.0, lengths_source=REPLAYED)


def run_workload(run: pd.Series | dict[str, Any]) -> Workload:
    """The workload of a row of the runs table: replayed from its run folder when it has one
    (``run_dir``), else drawn to match its totals."""
    run_dir = run.get("run_dir")
    if isinstance(run_dir, str) and run_dir:
        return replay_workload(read_requests(run_dir))
    return reference_run_workload(run)
