"""Benchmark models built offline: a model folder from a published architecture, no download.

A folder written here holds a Hugging Face ``config.json`` with the architecture of a catalog
row in ``hgresearch/data/catalogs/model_architectures.csv`` (layers, hidden size, heads, KV heads,
head dim, intermediate size, vocabulary, context) and a byte-level BPE tokenizer trained locally,
in seconds, on Python's own standard-library sources. There are **no weights**: vLLM serves the
folder with ``--load-format dummy`` (random weights). Inference speed does not depend on the
weight values, only on the shapes, so a GPU user can benchmark the paper's 14B architecture
without downloading 30 GB, provided outputs have a fixed length (``ignore_eos`` in the client:
random weights never choose to stop on their own in a way that matches real text).

The tokenizer's vocabulary is exactly ``vocab_size`` entries: the BPE part is trained up to
``min(vocab_size, tokenizer_train_vocab)``; the rest are filler tokens (plain ASCII strings),
so every id the random model samples decodes to visible text and streams as one event.
"""

from __future__ import annotations

import json
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hgresearch.data.catalogs import catalog_path, model_catalog
from hgresearch.errors import InputError

#: The model catalog file, named in errors about its rows.
ARCHITECTURES_FILE = str(catalog_path("model_architectures.csv"))

#: Marker file written into every synthesized model folder (provenance, catalog row).
MARKER = "hgresearch_model.json"
#: Special tokens of the synthesized tokenizer (ids 0, 1, 2).
SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"]
#: BPE merges are learned up to this many entries; larger vocabularies are filled up.
DEFAULT_TRAIN_VOCAB = 8192
#: Bytes of standard-library source used to train the tokenizer (enough for 8k merges).
DEFAULT_CORPUS_BYTES = 3_000_000

#: Per-family settings that the catalog does not list (they do not change the cost of a
#: forward pass: RoPE base, norm epsilon, activation).
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "LlamaForCausalLM": {"model_type": "llama", "hidden_act": "silu", "rms_norm_eps": 1e-5,
                         "rope_theta": 500000.0, "attention_bias": False, "mlp_bias": False},
    "Qwen2ForCausalLM": {"model_type": "qwen2", "hidden_act": "silu", "rms_norm_eps": 1e-6,
                         "rope_theta": 1000000.0, "use_sliding_window": False,
                         "sliding_window": None, "max_window_layers": 0},
    "Phi3ForCausalLM": {"model_type": "phi3", "hidden_act": "silu", "rms_norm_eps": 1e-5,
                        "rope_theta": 250000.0, "partial_rotary_factor": 1.0,
                        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attention_dropout": 0.0},
    "Gemma2ForCausalLM": {"model_type": "gemma2", "hidden_act": "gelu_pytorch_tanh",
                          "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
                          "rope_theta": 10000.0, "attn_logit_softcapping": 50.0,
                          "final_logit_softcapping": 30.0, "sliding_window": 4096,
                          "attention_bias": False},
}


@dataclass(frozen=True)
class Architecture:
    """One catalog row, typed."""

    model: str
    hf_id: str
    architecture: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    source: str
    date: str


def architecture(name: str) -> Architecture:
    """The catalog row for ``name`` (the ``model`` column, or the ``hf_id``)."""
    table = model_catalog()
    match = table[(table.model == name) | (table.hf_id.fillna("") == name)]
    if match.empty:
        known = ", ".join(table.model)
        raise InputError(f"unknown model {name!r}; known: {known}",
                         file=ARCHITECTURES_FILE, field="model")
    row = match.iloc[0]
    line = int(match.index[0]) + 2

    def as_int(field: str) -> int:
        value = row[field]
        if pd.isna(value) or int(value) != value or int(value) <= 0:
            raise InputError(f"expected a positive integer, got {value!r}",
                             file=ARCHITECTURES_FILE, line=line, field=field)
        return int(value)

    arch = Architecture(
        model=str(row.model), hf_id="" if pd.isna(row.hf_id) else str(row.hf_id),
        architecture=str(row.architecture),
        num_layers=as_int("num_layers"), hidden_size=as_int("hidden_size"),
        num_attention_heads=as_int("num_attention_heads"), num_kv_heads=as_int("num_kv_heads"),
        head_dim=as_int("head_dim"), intermediate_size=as_int("intermediate_size"),
        vocab_size=as_int("vocab_size"), max_position_embeddings=as_int("max_position_embeddings"),
        tie_word_embeddings=str(row.tie_word_embeddings).strip().lower() == "true",
        source=str(row.source), date=str(row.date),
    )
    if arch.architecture not in FAMILY_DEFAULTS:
        raise InputError(f"architecture {arch.architecture!r} is not supported by model synth "
                         f"(supported: {', '.join(FAMILY_DEFAULTS)})",
                         file=ARCHITECTURES_FILE, line=line, field="architecture")
    if arch.num_attention_heads % arch.num_kv_heads:
        raise InputError("num_attention_heads must be a multiple of num_kv_heads",
                         file=ARCHITECTURES_FILE, line=line, field="num_kv_heads")
    return arch


def hf_config(arch: Architecture, *, max_position_embeddings: int | None = None,
              torch_dtype: str = "bfloat16") -> dict[str, Any]:
    """The Hugging Face ``config.json`` for ``arch`` (shapes from the catalog)."""
    config: dict[str, Any] = {
        "architectures": [arch.architecture],
        **FAMILY_DEFAULTS[arch.architecture],
        "num_hidden_layers": arch.num_layers,
        "hidden_size": arch.hidden_size,
        "num_attention_heads": arch.num_attention_heads,
        "num_key_value_heads": arch.num_kv_heads,
        "head_dim": arch.head_dim,
        "intermediate_size": arch.intermediate_size,
        "vocab_size": arch.vocab_size,
        "max_position_embeddings": max_position_embeddings or arch.max_position_embeddings,
        "tie_word_embeddings": arch.tie_word_embeddings,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 2,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": torch_dtype,
    }
    if arch.architecture == "Gemma2ForCausalLM":
        config["query_pre_attn_scalar"] = arch.head_dim
    return config


def stdlib_corpus(max_bytes: int = DEFAULT_CORPUS_BYTES) -> Iterator[str]:
    """Text of Python's standard-library ``.py`` files in sorted path order, up to ``max_bytes``
    (a corpus every Python install has; same Python version -> same tokenizer)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    total = 0
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        yield text
        total += len(text)
        if total >= max_bytes:
            return


def train_tokenizer(vocab_size: int, *, train_vocab: int = DEFAULT_TRAIN_VOCAB,
                    corpus_bytes: int = DEFAULT_CORPUS_BYTES) -> Any:
    """A byte-level BPE tokenizer with exactly ``vocab_size`` ids (see the module docstring)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < len(SPECIAL_TOKENS) + 256 + 1:
        raise ValueError(f"vocab_size {vocab_size} is too small for a byte-level tokenizer")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=min(vocab_size, train_vocab), special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(stdlib_corpus(corpus_bytes), trainer=trainer)
    size = tokenizer.get_vocab_size()
    if size < vocab_size:
        # Filler ids: printable ASCII, so each decodes to visible text (one stream event each).
        spec = json.loads(tokenizer.to_str())
        vocab: dict[str, int] = spec["model"]["vocab"]
        next_id = max(vocab.values()) + 1
        while next_id < vocab_size:
            token = f"~f{next_id}~"
            if token not in vocab:
                vocab[token] = next_id
            next_id += 1
        tokenizer = Tokenizer.from_str(json.dumps(spec))
    return tokenizer


def synth_model(name: str, out_dir: str | Path, *, max_position_embeddings: int | None = None,
                train_vocab: int = DEFAULT_TRAIN_VOCAB, overwrite: bool = False) -> Path:
    """Write a weightless model folder for catalog model ``name`` into ``out_dir``.

    Args:
        name: ``model`` (or ``hf_id``) of a row of the model catalog.
        out_dir: folder to create (``config.json``, tokenizer files, :data:`MARKER`).
        max_position_embeddings: override the context length (e.g. to fit a KV cache).
        train_vocab: BPE vocabulary learned before filling up to the model's vocabulary.
        overwrite: replace an existing folder's files (else an existing folder is an error
            unless it already holds the same model).

    Returns:
        ``out_dir``. Serve it with ``--load-format dummy``.
    """
    arch = architecture(name)
    out = Path(out_dir)
    marker = out / MARKER
    config = hf_config(arch, max_position_embeddings=max_position_embeddings)
    if marker.exists() and not overwrite:
        previous = json.loads(marker.read_text())
        if previous.get("config") == config and (out / "tokenizer.json").exists():
            return out
        raise FileExistsError(f"{out} already holds another synthesized model; "
                              "pass overwrite=True (--overwrite) to replace it")
    if out.exists() and any(out.iterdir()) and not marker.exists() and not overwrite:
        raise FileExistsError(f"{out} exists and is not a synthesized model folder")
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(arch.vocab_size, train_vocab=train_vocab)
    tokenizer.save(str(out / "tokenizer.json"))
    _write_json(out / "config.json", config)
    _write_json(out / "generation_config.json",
                {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "do_sample": False})
    _write_json(out / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIAL_TOKENS[0], "eos_token": SPECIAL_TOKENS[1],
        "pad_token": SPECIAL_TOKENS[2], "add_bos_token": False, "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": config["max_position_embeddings"],
        # Minimal chat template so the chat endpoint works too.
        "chat_template": "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n"
                         "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
    })
    _write_json(out / "special_tokens_map.json", {
        "bos_token": SPECIAL_TOKENS[0], "eos_token": SPECIAL_TOKENS[1],
        "pad_token": SPECIAL_TOKENS[2]})
    _write_json(marker, {
        "model": arch.model, "hf_id": arch.hf_id, "catalog_source": arch.source,
        "catalog_date": arch.date, "weights": "none: serve with --load-format dummy",
        "tokenizer": f"byte-level BPE trained on Python stdlib sources "
                     f"({min(arch.vocab_size, train_vocab)} learned ids, "
                     f"{arch.vocab_size} total)",
        "config": config,
    })
    return out


def is_synthesized(model_dir: str | Path) -> bool:
    """True when ``model_dir`` was written by :func:`synth_model` (serve: ``--load-format
    dummy``)."""
    return (Path(model_dir) / MARKER).is_file()


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
