"""Text forms of the planner's inputs (the command line's ``--slo``, ``--length``, ``--max``,
``--candidate``), parsed into :mod:`hgresearch.plan.inputs` objects; errors name the option.

* ``--slo [NAME=]SPEC[@SHARE]``: SPEC is ``batch`` or comma-separated ``pXX_ttft:MS`` /
  ``pXX_tpot:MS`` (``p99_ttft:500``, ``p90_ttft:2000,p99_tpot:100``); SHARE the class's
  fraction of the demand (default 1, shares are normalised).
* ``--length NAME=PROMPT:OUTPUT[@FRACTION]``: a length class in tokens (``short=256:128@0.7``).
* ``--candidate 'Nx GPU'``: a configuration (``2x RTX-4090``).
* ``--max GPU=N`` caps the GPUs of a type (``H100-PCIe=2``); ``--max 'Nx GPU=N'`` caps the
  replicas of one configuration.
* ``--base-url 'Nx GPU=URL'``: a live endpoint of one replica of that configuration.
"""

from __future__ import annotations

import re

from hgresearch.errors import InputError
from hgresearch.plan.inputs import Candidate, LengthClass, SLOClass

_HARDWARE = re.compile(r"^\s*(\d+)\s*x\s*(\S+)\s*$")
_OBJECTIVE = re.compile(r"^p(\d+(?:\.\d+)?)_(ttft|tpot):(\d+(?:\.\d+)?)$")


def _share(text: str, option: str) -> tuple[str, float]:
    if "@" not in text:
        return text, 1.0
    body, share = text.rsplit("@", 1)
    try:
        value = float(share)
    except ValueError:
        raise InputError(f"expected a share after '@', got {share!r}", field=option) from None
    if not value > 0:
        raise InputError(f"expected a share > 0, got {share!r}", field=option)
    return body, value


def parse_slo(text: str, index: int = 0) -> SLOClass:
    """``[NAME=]SPEC[@SHARE]`` (see the module docstring) as an :class:`SLOClass`."""
    body, share = _share(text.strip(), "--slo")
    name, _, spec = body.rpartition("=")
    spec = spec.strip()
    name = name.strip() or (spec if spec == "batch" else f"slo{index + 1}")
    if spec == "batch":
        return SLOClass(name=name, share=share)
    fields: dict[str, float] = {}
    for part in spec.split(","):
        match = _OBJECTIVE.match(part.strip())
        if match is None:
            raise InputError(f"expected 'batch' or pXX_ttft:MS / pXX_tpot:MS (e.g. "
                             f"p99_ttft:500), got {part.strip()!r}", field="--slo")
        percentile, metric, limit = float(match[1]), match[2], float(match[3])
        fields[f"{metric}_ms"] = limit
        fields[f"{metric}_percentile"] = percentile
    return SLOClass(name=name, share=share, **fields)


def parse_length(text: str) -> LengthClass:
    """``NAME=PROMPT:OUTPUT[@FRACTION]`` as a :class:`LengthClass`."""
    body, fraction = _share(text.strip(), "--length")
    name, _, tokens = body.rpartition("=")
    match = re.match(r"^(\d+):(\d+)$", tokens.strip())
    if not name.strip() or match is None:
        raise InputError(f"expected NAME=PROMPT:OUTPUT[@FRACTION] in tokens (e.g. "
                         f"short=256:128@0.7), got {text!r}", field="--length")
    return LengthClass(name.strip(), int(match[1]), int(match[2]), fraction)


def parse_candidate(text: str) -> Candidate:
    """``Nx GPU`` as a :class:`Candidate`."""
    match = _HARDWARE.match(text)
    if match is None or int(match[1]) < 1:
        raise InputError(f"expected 'Nx GPU' (e.g. '2x RTX-4090'), got {text!r}",
                         field="--candidate")
    return Candidate(match[2], int(match[1]))


def parse_caps(texts: list[str], candidates: list[Candidate]
               ) -> tuple[list[Candidate], tuple[tuple[str, int], ...]]:
    """Apply ``--max`` caps: per configuration (``Nx GPU=N``) onto ``candidates``, per GPU type
    (``GPU=N``) into the returned GPU caps."""
    out = list(candidates)
    gpu_caps = []
    for text in texts:
        key, _, value = text.rpartition("=")
        if not key.strip() or not value.strip().isdigit():
            raise InputError(f"expected GPU=N or 'Nx GPU=N' with N an integer >= 0, got "
                             f"{text!r}", field="--max")
        cap = int(value)
        hardware = _HARDWARE.match(key)
        if hardware is None:
            gpu_caps.append((key.strip(), cap))
            continue
        target = parse_candidate(key)
        matches = [i for i, c in enumerate(out)
                   if (c.gpu_name, c.num_gpus) == (target.gpu_name, target.num_gpus)]
        if not matches:
            raise InputError(f"{key.strip()!r} is not a candidate (candidates: "
                             f"{', '.join(c.hardware for c in out)})", field="--max")
        from dataclasses import replace
        out[matches[0]] = replace(out[matches[0]], max_replicas=cap)
    return out, tuple(gpu_caps)


def parse_base_urls(texts: list[str], model: str) -> dict[str, list[str]]:
    """``--base-url 'Nx GPU=URL'`` (repeatable) as URLs per configuration label, in order."""
    out: dict[str, list[str]] = {}
    for text in texts:
        key, sep, url = text.partition("=")
        if not sep or not url.strip().startswith(("http://", "https://")):
            raise InputError(f"expected 'Nx GPU=http://host:port', got {text!r}",
                             field="--base-url")
        out.setdefault(parse_candidate(key).label(model), []).append(url.strip())
    return out
