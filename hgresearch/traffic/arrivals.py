"""Request arrival schedules: one definition, used by the live client and by the simulator.

Gaps follow vLLM's definition: gamma with shape ``burstiness`` and scale
``1 / (rate * burstiness)`` (burstiness 1 is Poisson); ``"constant"`` spaces requests evenly;
an infinite rate sends everything at offset 0.

Two generators, on purpose:

* :func:`arrival_offsets_ns` — our client's schedule: absolute offsets drawn up front from a
  ``numpy.random.Generator`` (so lag never accumulates and per-request lag can be recorded).
* :func:`vllm085_arrival_gaps_s` — the gaps vLLM 0.8.5's ``benchmark_serving.py`` draws, with
  its legacy global numpy RNG, so the paper's arrival times can be regenerated exactly.

Pure numpy, no I/O: this module sits below both ``hgresearch.bench`` and ``hgresearch.sim``.
"""

from __future__ import annotations

import math

import numpy as np

#: The paper's request rates (req/s), in the order it ran them.
PAPER_QPS = (32.0, 16.0, 8.0, 4.0, 1.0)

#: The ``--seed`` the paper's runs passed to vLLM's ``benchmark_serving.py``.
PAPER_SEED = 42


def arrival_offsets_ns(
    n: int, rate_qps: float, *, burstiness: float = 1.0, seed: int = 0,
    kind: str = "gamma",
) -> np.ndarray:
    """Send offsets (ns from the run start, int64, non-decreasing) of ``n`` requests.

    Args:
        n: number of requests.
        rate_qps: mean request rate; ``math.inf`` sends all at offset 0.
        burstiness: gamma shape (1 = Poisson; < 1 burstier, > 1 more regular).
        seed: seed of the gap generator (same seed -> same schedule).
        kind: ``"gamma"`` (Poisson when burstiness is 1) or ``"constant"``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not rate_qps > 0:
        raise ValueError(f"request rate must be > 0 (or inf), got {rate_qps}")
    if math.isinf(rate_qps):
        return np.zeros(n, dtype=np.int64)
    if kind == "constant":
        gaps = np.full(n, 1.0 / rate_qps)
    elif kind in ("gamma", "poisson"):
        if not burstiness > 0:
            raise ValueError(f"burstiness must be > 0, got {burstiness}")
        rng = np.random.default_rng(seed)
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate_qps * burstiness), size=n)
    else:
        raise ValueError(f"schedule kind must be 'gamma', 'poisson' or 'constant', got {kind!r}")
    # The first request goes at offset 0, like vLLM (which sleeps after each send).
    offsets = np.concatenate([[0.0], np.cumsum(gaps[:-1])]) if n else np.zeros(0)
    return np.round(offsets * 1e9).astype(np.int64)


def vllm085_arrival_gaps_s(
    rate: float, n: int, seed: int = PAPER_SEED, burstiness: float = 1.0,
) -> np.ndarray:
    """The ``n`` sleeps (s) vLLM 0.8.5's ``benchmark_serving.py`` draws for ``n`` requests.

    vLLM's ``main`` calls ``np.random.seed(seed)`` (and ``random.seed``; the ShareGPT sampler
    uses only :mod:`random`, so no numpy draw comes before the gaps), then ``get_request``
    yields a request and *after* each one draws
    ``np.random.gamma(shape=burstiness, scale=1/(rate*burstiness))`` and sleeps that long. So
    ``n`` requests draw ``n`` gaps: gap ``i`` separates request ``i`` from request ``i + 1``,
    and the last one is slept after the last send (it still lengthens the benchmark's measured
    duration, which ends after that sleep *and* the last response). Send times are the
    cumulative sums of the first ``n - 1`` gaps, starting at 0 (see
    :func:`vllm085_send_offsets_s`). The sleeps are relative, so in a live run any send lag
    accumulates; these are the intended times.

    The legacy global RNG is reproduced with a private :class:`numpy.random.RandomState`
    (same stream as ``np.random.seed`` + ``np.random.gamma``) so callers' global state is
    untouched. An infinite rate draws nothing (vLLM skips the draw): zeros.

    Args:
        rate: request rate (req/s), > 0 (``math.inf`` allowed).
        n: number of requests (``--num-prompts``).
        seed: ``--seed`` of the run (the paper's runs: 42).
        burstiness: ``--burstiness`` (1: Poisson).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not rate > 0:
        raise ValueError(f"request rate must be > 0 (or inf), got {rate}")
    if not burstiness > 0:
        raise ValueError(f"burstiness must be > 0, got {burstiness}")
    if math.isinf(rate):
        return np.zeros(n)
    state = np.random.RandomState(seed)
    scale = 1.0 / (rate * burstiness)
    # One scalar draw per request, as vLLM does; a vector draw of the same size gives the same
    # numbers for gamma, but the loop keeps the correspondence with the source obvious.
    return np.array([state.gamma(shape=burstiness, scale=scale) for _ in range(n)])


def vllm085_send_offsets_s(
    rate: float, n: int, seed: int = PAPER_SEED, burstiness: float = 1.0,
) -> np.ndarray:
    """Intended send times (s from the first send) of vLLM 0.8.5's ``benchmark_serving.py``:
    0, then the cumulative sum of the first ``n - 1`` gaps of :func:`vllm085_arrival_gaps_s`."""
    gaps = vllm085_arrival_gaps_s(rate, n, seed=seed, burstiness=burstiness)
    if n == 0:
        return np.zeros(0)
    return np.concatenate([[0.0], np.cumsum(gaps[:-1])])
