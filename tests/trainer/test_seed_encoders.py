"""The seed lesson's four encoders (BERT, RoBERTa, DeBERTa-v2/v3, ModernBERT), each a tiny randomly initialised
model built here (config and tokenizer, no hub), taken through what `--base-model DIR` does: train and register,
the fast path's export and gate, serving from the registry, and `evaluate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ARCHITECTURES = ("bert", "roberta", "deberta-v2", "modernbert")
SIZE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


def whole_words(minilm: Path, limit: int = 3000) -> list[str]:
    """The offline MiniLM's whole-word pieces (no ##), in its vocabulary's order."""
    words = (minilm / "vocab.txt").read_text().split("\n")
    return [word for word in words if word.isalpha() and word.isascii()][:limit]


def byte_level_bpe(special: list[str], words: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A byte-level BPE vocabulary and merges (GPT-2's scheme, as RoBERTa and ModernBERT use): the 256 byte
    symbols, then each of `words` (with and without its leading space, Ġ) merged left to right."""
    from tokenizers.pre_tokenizers import ByteLevel

    vocab = {token: i for i, token in enumerate(special)}
    for symbol in sorted(ByteLevel.alphabet()):
        vocab.setdefault(symbol, len(vocab))
    merges: list[tuple[str, str]] = []
    for word in words:
        for spelt in (word, "Ġ" + word):
            merged = spelt[0]
            for char in spelt[1:]:
                if merged + char not in vocab:
                    merges.append((merged, char))
                    vocab[merged + char] = len(vocab)
                merged += char
    return vocab, merges


def build_tokenizer(architecture: str, minilm: Path):
    """The tokenizer class each architecture's hub checkpoints use, built from local pieces."""
    from transformers import AutoTokenizer, DebertaV2Tokenizer, PreTrainedTokenizerFast, RobertaTokenizer

    words = whole_words(minilm)
    if architecture == "bert":
        return AutoTokenizer.from_pretrained(minilm)
    if architecture == "roberta":
        vocab, merges = byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"], words)
        return RobertaTokenizer(vocab=vocab, merges=merges)
    if architecture == "deberta-v2":  # sentencepiece's unigram, as deberta-v3's spm.model
        pieces = [("[PAD]", 0.0), ("[UNK]", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0), ("▁", -2.0)]
        pieces += [("▁" + word, -1.0) for word in words] + [(word, -1.5) for word in words]
        pieces += [(chr(code), -8.0) for code in range(33, 127)]
        return DebertaV2Tokenizer(vocab=pieces)
    # ModernBERT: a byte-level BPE in a plain PreTrainedTokenizerFast, [CLS] … [SEP], no token_type_ids
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    special = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    vocab, merges = byte_level_bpe(special, words)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges,
                                   unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]",
                                   model_input_names=["input_ids", "attention_mask"])


def build_config(architecture: str, tokenizer):
    """A tiny config of each architecture, its special tokens the tokenizer's."""
    from transformers import BertConfig, DebertaV2Config, ModernBertConfig, RobertaConfig

    ids = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id}
    if architecture == "bert":
        return BertConfig(**SIZE, **ids, max_position_embeddings=128)
    if architecture == "roberta":  # positions start after the padding index, as in roberta-base
        return RobertaConfig(**SIZE, **ids, max_position_embeddings=130, bos_token_id=tokenizer.bos_token_id,
                             eos_token_id=tokenizer.eos_token_id, type_vocab_size=1)
    if architecture == "deberta-v2":  # deberta-v3-base's settings: relative attention, no token types
        return DebertaV2Config(**SIZE, **ids, max_position_embeddings=128, relative_attention=True,
                               position_buckets=32, pos_att_type=["p2c", "c2p"], position_biased_input=False,
                               norm_rel_ebd="layer_norm", share_att_key=True, type_vocab_size=0)
    return ModernBertConfig(**SIZE, **ids, max_position_embeddings=128, cls_token_id=tokenizer.cls_token_id,
                            sep_token_id=tokenizer.sep_token_id, bos_token_id=tokenizer.cls_token_id,
                            eos_token_id=tokenizer.sep_token_id, global_attn_every_n_layers=2,
                            local_attention=16)


def build_tiny(architecture: str, directory: Path, minilm: Path) -> Path:
    """A randomly initialised encoder of `architecture` and its tokenizer, saved as a local model directory."""
    import torch
    from transformers import AutoModel

    tokenizer = build_tokenizer(architecture, minilm)
    torch.manual_seed(0)
    AutoModel.from_config(build_config(architecture, tokenizer)).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def seed_encoders(tmp_path_factory, minilm_path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("seed-encoders")
    return {name: build_tiny(name, root / name, Path(minilm_path)) for name in ARCHITECTURES}


def write_jsonl(path: Path, examples) -> Path:
    rows = [{"title": e.title, "body": e.body, "label": e.label, "repo": e.repo} for e in examples]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.slow  # fine-tunes (tiny models) and exports each to ONNX
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_each_seed_encoder_trains_exports_serves_and_evaluates(architecture, seed_encoders, small_train,
                                                                small_heldout, tmp_path, database_url, model_dir,
                                                                registry, capsys, without_shared):
    from core.engines import served_engine
    from core.settings import Settings
    from issue_sorter.cli import main

    settings = Settings(webhook_secret="", database_url=database_url, model_dir=model_dir)
    train_file, eval_file = write_jsonl(tmp_path / "train.jsonl", small_train), write_jsonl(
        tmp_path / "eval.jsonl", small_heldout)
    base = seed_encoders[architecture]
    argv = ["train", train_file, "--base-model", base, "--max-length", 32, "--epochs", 1, "--batch-size", 8,
            "--lr", 1e-3, "--eval", eval_file, "--force", "--no-progress"]
    assert main([str(arg) for arg in argv], load=lambda **_: settings) == 0

    serving = registry.serving()
    assert serving is not None and serving.base_model == str(base)
    fast_path = registry.model(serving.version).card.fast_path
    assert "error" not in fast_path, fast_path.get("error")  # the export itself worked
    fp32 = fast_path["gates"]["onnxruntime-fp32"]
    assert fp32["passed"] and fp32["top_label_agreement"] == 1.0, fp32  # the fused graph answers as PyTorch

    served = registry.load()  # as a worker loads it: the engine its gates allow on this CPU
    assert served_engine(served) is not None  # an engine of the encoder serves
    scores = served.predict(["The app crashes when I save a file", "Please add a dark mode"])
    assert all(set(row) == set(served.labels) and abs(sum(row.values()) - 1) < 1e-4 for row in scores)

    capsys.readouterr()
    assert main(["evaluate", str(eval_file), "--json"], load=lambda **_: settings) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model_version"] == serving.version and result["n_scored"] == len(small_heldout)
