"""Offline benchmark models: config shapes from the catalog and a locally trained tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hgresearch.bench.dummy_model import architecture, hf_config, is_synthesized, synth_model
from hgresearch.errors import InputError


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_model("tiny-llama-cpu", tmp_path_factory.mktemp("models") / "tiny")


def test_tiny_model_folder_has_catalog_shapes_and_full_vocab_tokenizer(tiny_dir: Path) -> None:
    from tokenizers import Tokenizer

    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
            config["head_dim"], config["intermediate_size"]) == (2, 256, 4, 64, 512)
    tokenizer = Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    # Every id the random model can sample must exist in the tokenizer.
    assert tokenizer.get_vocab_size() == config["vocab_size"] == 4096
    ids = tokenizer.encode("def main():\n    return 42").ids
    assert len(ids) < 15 and tokenizer.decode(ids) == "def main():\n    return 42"
    assert is_synthesized(tiny_dir)
    assert not (tiny_dir / "model.safetensors").exists()


def test_synth_is_idempotent_and_refuses_to_overwrite_another_model(tiny_dir: Path) -> None:
    before = (tiny_dir / "tokenizer.json").stat().st_mtime_ns
    assert synth_model("tiny-llama-cpu", tiny_dir) == tiny_dir
    assert (tiny_dir / "tokenizer.json").stat().st_mtime_ns == before
    with pytest.raises(FileExistsError, match="another synthesized model"):
        synth_model("tiny-llama-cpu", tiny_dir, max_position_embeddings=512)


@pytest.mark.parametrize("name, layers, hidden, heads, kv_heads, inter, vocab", [
    ("DeepSeek-R1-Distill-Qwen-14B", 48, 5120, 40, 8, 13824, 152064),
    ("DeepSeek-R1-Distill-Llama-70B", 80, 8192, 64, 8, 28672, 128256),
    ("Meta-Llama-3-8B-Instruct", 32, 4096, 32, 8, 14336, 128256),
])
def test_paper_architectures_map_to_hf_configs(name: str, layers: int, hidden: int, heads: int,
                                               kv_heads: int, inter: int, vocab: int) -> None:
    config = hf_config(architecture(name))
    assert (config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
            config["num_key_value_heads"], config["intermediate_size"],
            config["vocab_size"]) == (layers, hidden, heads, kv_heads, inter, vocab)
    assert config["model_type"] in ("qwen2", "llama")


def test_large_vocab_tokenizer_is_filled_to_the_model_vocab(tmp_path: Path) -> None:
    from hgresearch.bench.dummy_model import train_tokenizer

    tokenizer = train_tokenizer(20000, train_vocab=1024, corpus_bytes=200_000)
    assert tokenizer.get_vocab_size() == 20000
    assert tokenizer.decode([19999]) != ""  # filler ids decode to visible text


def test_unknown_model_names_the_catalog_field() -> None:
    with pytest.raises(InputError, match="unknown model 'no-such-model'") as err:
        architecture("no-such-model")
    assert err.value.field == "model"
