"""Request length distributions: one definition, used by the live client and by the simulator.

* :func:`draw_lengths` — integer lengths from a named distribution (the ``synthetic`` workload
  of ``hgresearch bench`` and anything else that needs seeded lengths).
* :func:`sharegpt_like_lengths` — prompt and output lengths shaped like vLLM's filtered ShareGPT
  sample (lognormal, prompt ≤ 1024, prompt + output ≤ 2048 tokens) whose totals match given
  means exactly: what the simulator replays where a run kept only its token totals (the
  paper's result files).

Pure numpy, no I/O: this module sits below both ``hgresearch.bench`` and ``hgresearch.sim``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hgresearch.errors import InputError

#: Named length distributions: ``(rng, params, n) -> float values`` (floored and clipped later).
DISTRIBUTIONS: dict[str, Callable[[np.random.Generator, dict[str, Any], int], np.ndarray]] = {
    "constant": lambda r, p, n: np.full(n, float(p["value"])),
    "uniform": lambda r, p, n: r.uniform(float(p["low"]), float(p["high"]) + 1, size=n),
    "normal": lambda r, p, n: r.normal(float(p["mean"]), float(p["std"]), size=n),
    "lognormal": lambda r, p, n: float(p["median"]) * np.exp(r.normal(0, float(p["sigma"]), n)),
    "exponential": lambda r, p, n: r.exponential(float(p["mean"]), size=n),
}

#: vLLM's ShareGPT filters (benchmark_serving.py, 0.8.5).
SHAREGPT_MIN_TOK = 4
SHAREGPT_MAX_PROMPT_TOK = 1024
SHAREGPT_MAX_TOTAL_TOK = 2048

#: Log-space spread of ShareGPT prompt and output lengths (tokens) after vLLM's filters: an
#: assumption (a lognormal fitted by eye to the published ShareGPT-V3 length histograms), not
#: a measurement of the paper's sample, which its result files do not keep.
SHAREGPT_PROMPT_SIGMA = 0.8
SHAREGPT_OUTPUT_SIGMA = 0.6


def draw_lengths(dist: dict[str, Any], n: int, rng: np.random.Generator) -> np.ndarray:
    """Integer lengths from ``{"dist": name, <params>, "min": 1, "max": ...}`` (clipped)."""
    name = dist.get("dist", "constant")
    if name not in DISTRIBUTIONS:
        raise InputError(f"unknown distribution {name!r}; expected one of "
                         f"{sorted(DISTRIBUTIONS)}", field="dist")
    values = DISTRIBUTIONS[name](rng, dist, n)
    lo, hi = int(dist.get("min", 1)), int(dist.get("max", 1 << 20))
    lengths: np.ndarray = np.clip(np.floor(values), lo, hi).astype(int)
    return lengths


def _scaled(z: np.ndarray, sigma: float, cap: np.ndarray, total: int) -> np.ndarray:
    """``clip(round(m·exp(σz)), 4, cap)`` with ``m`` chosen so the sum is ``total`` exactly
    (bisection on ``m``, then the last few tokens spread one each over uncapped entries)."""
    def lengths(median: float) -> np.ndarray:
        return np.clip(np.round(median * np.exp(sigma * z)), SHAREGPT_MIN_TOK, cap).astype(int)

    lo, hi = 1e-3, float(cap.max())
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if lengths(mid).sum() < total else (lo, mid)
    out = lengths(lo)
    # Rounding leaves a small remainder: add it one token at a time to the largest uncapped ones.
    order = np.argsort(-out, kind="stable")
    for i in order:
        if out.sum() >= total:
            break
        if out[i] < cap[i]:
            out[i] += 1
    return out


def sharegpt_like_lengths(
    n: int, mean_prompt_tokens: float, mean_output_tokens: float, *, seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths of ``n`` requests, ShareGPT-like, with the given means.

    Prompts are lognormal (log-spread :data:`SHAREGPT_PROMPT_SIGMA`) capped at 1024 tokens,
    outputs lognormal (:data:`SHAREGPT_OUTPUT_SIGMA`) capped so prompt + output ≤ 2048 (vLLM's
    filters); each side's median is solved for so that the totals are ``round(n × mean)``
    exactly. Deterministic for a seed.

    Raises:
        InputError: for ``n < 1`` or means outside what the filters allow.
    """
    if n < 1:
        raise InputError(f"expected at least one request, got {n}", field="num_prompts")
    if not SHAREGPT_MIN_TOK <= mean_prompt_tokens <= SHAREGPT_MAX_PROMPT_TOK / 2:
        raise InputError(f"mean prompt length {mean_prompt_tokens} outside "
                         f"[{SHAREGPT_MIN_TOK}, {SHAREGPT_MAX_PROMPT_TOK // 2}]",
                         field="mean_prompt_tokens")
    if not SHAREGPT_MIN_TOK <= mean_output_tokens <= SHAREGPT_MAX_TOTAL_TOK / 4:
        raise InputError(f"mean output length {mean_output_tokens} outside "
                         f"[{SHAREGPT_MIN_TOK}, {SHAREGPT_MAX_TOTAL_TOK // 4}]",
                         field="mean_output_tokens")
    rng = np.random.default_rng(seed)
    z_prompt, z_output = rng.standard_normal(n), rng.standard_normal(n)
    prompts = _scaled(z_prompt, SHAREGPT_PROMPT_SIGMA, np.full(n, SHAREGPT_MAX_PROMPT_TOK),
                      round(n * mean_prompt_tokens))
    outputs = _scaled(z_output, SHAREGPT_OUTPUT_SIGMA, SHAREGPT_MAX_TOTAL_TOK - prompts,
                      round(n * mean_output_tokens))
    return prompts, outputs
