"""Workloads: the list of requests (prompt, prompt length, output length) a run sends.

Four sources, all seeded:

* ``sharegpt`` — ShareGPT JSON (a list of ``{"conversations": [{"from", "value"}, ...]}``):
  the first human turn is the prompt, the following reply's token count is the output length;
  vLLM's filters: drop prompt < 4 or output < 4 tokens, prompt > 1024, prompt + output > 2048;
* ``random`` — vLLM 0.8.5's random dataset: lengths uniform in ``[len * range_ratio, len]``,
  prompts built from token ids (or words without a tokenizer);
* ``synthetic`` — input/output lengths drawn from named distributions;
* ``jsonl`` — custom file, one ``{"prompt": str, "output_len": int}`` per line.

Token counts here are the *client's* estimate, used to build prompts of a given length and to
set ``max_tokens``; the server's ``usage`` answer is the source of truth for the run's metrics.
Without a tokenizer path the estimate counts whitespace-separated words.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hgresearch.data.files import iter_json_lines, read_text
from hgresearch.errors import InputError

# The length distributions and vLLM's ShareGPT filters live below bench, shared with the
# simulator; re-exported here for existing callers.
from hgresearch.traffic.lengths import (
    SHAREGPT_MAX_PROMPT_TOK,
    SHAREGPT_MAX_TOTAL_TOK,
    SHAREGPT_MIN_TOK,
    draw_lengths,
)


@dataclass(frozen=True)
class RequestSpec:
    """One request of a workload: ``index`` is its position in the run (stable across resume)."""

    index: int
    prompt: str
    prompt_len: int
    output_len: int


#: One request of a source before it gets its index: prompt, prompt length, output length.
Row = tuple[str, int, int]


class Tokenizer(Protocol):
    """What workloads need from a tokenizer."""

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: list[int]) -> str: ...
    @property
    def vocab_size(self) -> int: ...


class WordTokenizer:
    """Whitespace 'tokenizer' used when no tokenizer path is given (an approximation)."""

    def __init__(self, vocab_size: int = 4096) -> None:
        self._vocab = [f"w{i}" for i in range(vocab_size)]
        self._ids = {w: i for i, w in enumerate(self._vocab)}

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def encode(self, text: str) -> list[int]:
        # Unknown words hash into the vocabulary; only the count matters for lengths.
        return [self._ids.get(w, hash(w) % len(self._vocab)) for w in text.split()]

    def decode(self, ids: list[int]) -> str:
        return " ".join(self._vocab[i % len(self._vocab)] for i in ids)


class HFTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer read from a local file or model folder."""

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer as _Tok
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise RuntimeError("a tokenizer path needs the 'tokenizers' package") from err
        path = Path(path)
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise InputError("no tokenizer.json here (give a file or a model folder)",
                             file=str(path), field="tokenizer")
        self._tok = _Tok.from_file(str(file))

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size())

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids))


def load_tokenizer(path: str | Path | None) -> Tokenizer:
    """The tokenizer at ``path`` (local only), or the word approximation when ``None``."""
    return WordTokenizer() if path is None else HFTokenizer(path)


def _sharegpt(params: dict[str, Any], n: int, seed: int, tok: Tokenizer) -> list[Row]:
    path = Path(params["path"])
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise InputError(f"malformed JSON: {err.msg}", file=str(path), line=err.lineno) from None
    if not isinstance(data, list):
        raise InputError("expected a JSON list of conversations", file=str(path))
    fixed_output = params.get("output_len")
    pairs = []
    for entry in data:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            continue
        for i in range(len(turns) - 1):
            if turns[i].get("from") == "human":
                pairs.append((str(turns[i].get("value", "")), str(turns[i + 1].get("value", ""))))
                break
    random.Random(seed).shuffle(pairs)
    out = []
    for prompt, reply in pairs:
        prompt_len = len(tok.encode(prompt))
        output_len = int(fixed_output) if fixed_output else len(tok.encode(reply))
        if prompt_len < SHAREGPT_MIN_TOK or (not fixed_output and output_len < SHAREGPT_MIN_TOK):
            continue
        if prompt_len > SHAREGPT_MAX_PROMPT_TOK or \
                prompt_len + output_len > SHAREGPT_MAX_TOTAL_TOK:
            continue
        out.append((prompt, prompt_len, output_len))
    if not out:
        raise InputError("no conversation passes vLLM's length filters", file=str(path))
    return out


def _random(params: dict[str, Any], n: int, seed: int, tok: Tokenizer) -> list[Row]:
    input_len = int(params.get("input_len", 1024))
    output_len = int(params.get("output_len", 128))
    ratio = float(params.get("range_ratio", 1.0))
    prefix_len = int(params.get("prefix_len", 0))
    rng = np.random.default_rng(seed)
    vocab = tok.vocab_size
    prefix = rng.integers(0, vocab, size=prefix_len).tolist()
    in_lens = rng.integers(int(input_len * ratio), input_len + 1, size=n)
    out_lens = rng.integers(max(1, int(output_len * ratio)), output_len + 1, size=n)
    starts = rng.integers(0, vocab, size=n)
    out = []
    for i in range(n):
        ids = prefix + [int(starts[i] + i + j) % vocab for j in range(int(in_lens[i]))]
        out.append((tok.decode(ids), prefix_len + int(in_lens[i]), int(out_lens[i])))
    return out


def _synthetic(params: dict[str, Any], n: int, seed: int, tok: Tokenizer) -> list[Row]:
    rng = np.random.default_rng(seed)
    in_lens = draw_lengths(params.get("input", {"dist": "constant", "value": 128}), n, rng)
    out_lens = draw_lengths(params.get("output", {"dist": "constant", "value": 128}), n, rng)
    vocab = tok.vocab_size
    starts = rng.integers(0, vocab, size=n)
    return [(tok.decode([int(starts[i] + j) % vocab for j in range(int(in_lens[i]))]),
             int(in_lens[i]), int(out_lens[i])) for i in range(n)]


def _jsonl(params: dict[str, Any], n: int, seed: int, tok: Tokenizer) -> list[Row]:
    path = Path(params["path"])
    out = []
    for number, row in iter_json_lines(path):
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise InputError("expected a string", file=str(path), line=number, field="prompt")
        output_len = row.get("output_len")
        if isinstance(output_len, bool) or not isinstance(output_len, int) or output_len < 1:
            raise InputError(f"expected a positive integer, got {output_len!r}",
                             file=str(path), line=number, field="output_len")
        out.append((row["prompt"], len(tok.encode(row["prompt"])), output_len))
    if not out:
        raise InputError("no requests in file", file=str(path))
    if params.get("shuffle", False):
        random.Random(seed).shuffle(out)
    return out


WORKLOADS = {"sharegpt": _sharegpt, "random": _random, "synthetic": _synthetic, "jsonl": _jsonl}


def parse_workload(text: str) -> dict[str, Any]:
    """``"random:input_len=128,output_len=64"`` -> ``{"kind": "random", ...}`` (CLI form).

    Values are parsed as JSON where possible (numbers), else kept as strings. A text starting
    with ``{`` is read as the whole spec in JSON (needed for nested synthetic distributions).
    """
    if text.lstrip().startswith("{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"malformed JSON: {err.msg}", field="workload") from None
        if not isinstance(whole, dict) or "kind" not in whole:
            raise InputError("expected a JSON object with 'kind'", field="workload")
        return whole
    kind, _, rest = text.partition(":")
    spec: dict[str, Any] = {"kind": kind.strip()}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"expected key=value, got {item!r}", field="workload")
        try:
            spec[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            spec[key.strip()] = value
    return spec


#: Keys each workload kind takes besides ``kind`` (anything else is a typo to report).
WORKLOAD_KEYS = {
    "random": ("input_len", "output_len", "range_ratio", "prefix_len"),
    "sharegpt": ("path", "output_len"),
    "jsonl": ("path", "shuffle"),
    "synthetic": ("input", "output"),
}
#: Parameters of each length distribution of a synthetic workload (besides min/max).
DIST_PARAMS = {"constant": ("value",), "uniform": ("low", "high"), "normal": ("mean", "std"),
               "lognormal": ("median", "sigma"), "exponential": ("mean",)}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        bool(np.isfinite(value))


def _check_dist(kind: str, side: str, dist: Any) -> None:
    where = f"{kind} workload: {side}"
    if not isinstance(dist, dict):
        raise InputError(f"{where} must be a mapping like {{\"dist\": \"constant\", "
                         f"\"value\": 128}}, got {dist!r}", field="workload")
    name = dist.get("dist", "constant")
    if name not in DIST_PARAMS:
        raise InputError(f"{where}: unknown distribution {name!r}; expected one of "
                         f"{sorted(DIST_PARAMS)}", field="workload")
    allowed = ("dist", "min", "max", *DIST_PARAMS[name])
    for key in dist:
        if key not in allowed:
            raise InputError(f"{where}: unknown key {key!r} for {name}; expected "
                             f"{', '.join(allowed)}", field="workload")
    for key in DIST_PARAMS[name]:
        if not _is_number(dist.get(key)):
            raise InputError(f"{where}: {name} needs a number {key!r}, got "
                             f"{dist.get(key)!r}", field="workload")
    lo, hi = dist.get("min", 1), dist.get("max", 1 << 20)
    if not _is_int(lo) or lo < 1 or not _is_int(hi) or hi < lo:
        raise InputError(f"{where}: min and max must be integers with 1 <= min <= max, got "
                         f"min={lo!r}, max={hi!r}", field="workload")
    bad = {"uniform": lambda d: d["low"] > d["high"], "normal": lambda d: d["std"] < 0,
           "lognormal": lambda d: d["median"] <= 0 or d["sigma"] < 0,
           "exponential": lambda d: d["mean"] <= 0}.get(name)
    if bad is not None and bad(dist):
        raise InputError(f"{where}: impossible {name} parameters {dist!r}", field="workload")


def validate_workload(spec: Any, *, files: bool = True) -> None:
    """Check a workload spec before anything is sent or written: a known kind, only its keys,
    lengths that are integers >= 1, an existing file (not with ``files=False``: a sweep file
    is checked when it is read, its dataset when the sweep starts). Raises
    :class:`InputError` (field ``workload``) saying which key is wrong and what is expected."""
    if not isinstance(spec, dict):
        raise InputError(f"expected a mapping with 'kind', got {spec!r}", field="workload")
    kind = spec.get("kind")
    if kind not in WORKLOADS:
        raise InputError(f"unknown workload {kind!r}; expected one of {sorted(WORKLOADS)}",
                         field="workload")
    for key in spec:
        if key != "kind" and key not in WORKLOAD_KEYS[kind]:
            raise InputError(f"{kind} workload: unknown key {key!r}; expected "
                             f"{', '.join(WORKLOAD_KEYS[kind])}", field="workload")

    def length(key: str, low: int, default: Any = None) -> None:
        value = spec.get(key, default)
        if value is not None and (not _is_int(value) or value < low):
            raise InputError(f"{kind} workload: {key} must be an integer >= {low}, got "
                             f"{value!r}", field="workload")

    if kind == "random":
        length("input_len", 1)
        length("output_len", 1)
        length("prefix_len", 0)
        ratio = spec.get("range_ratio", 1.0)
        if not _is_number(ratio) or not 0 <= ratio <= 1:
            raise InputError(f"random workload: range_ratio must be a number in [0, 1], got "
                             f"{ratio!r}", field="workload")
    elif kind in ("sharegpt", "jsonl"):
        path = spec.get("path")
        if not isinstance(path, str) or not path:
            raise InputError(f"{kind} workload: needs path=FILE", field="workload")
        if files and not Path(path).is_file():
            raise InputError(f"{kind} workload: no such file: {path}", field="workload")
        if kind == "sharegpt":
            length("output_len", 1)
        elif not isinstance(spec.get("shuffle", False), bool):
            raise InputError(f"jsonl workload: shuffle must be true or false, got "
                             f"{spec['shuffle']!r}", field="workload")
    else:
        for side in ("input", "output"):
            if side in spec:
                _check_dist(kind, side, spec[side])


def build_requests(spec: dict[str, Any], n: int, *, seed: int = 0,
                   tokenizer: str | Path | None = None) -> list[RequestSpec]:
    """``n`` requests of workload ``spec`` (``{"kind": ..., params}``), indices 0..n-1.

    Sources with fewer valid entries than ``n`` are cycled in their (shuffled) order. The
    spec is checked first (:func:`validate_workload`).
    """
    validate_workload(spec)
    kind = spec["kind"]
    tok = load_tokenizer(tokenizer)
    rows = WORKLOADS[kind](spec, n, seed, tok)
    return [RequestSpec(i, *rows[i % len(rows)]) for i in range(n)]
