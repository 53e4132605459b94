"""Every place that loads an encoder takes safetensors only, so a pickled checkpoint
(pytorch_model.bin, read by torch.load) is refused instead of run."""

import shutil
from pathlib import Path

import pytest

from core.card import ModelCard, write_card
from trainer.config import offline_minilm_path


@pytest.fixture
def pickled_encoder(tmp_path):
    """A tiny BERT saved the old way (pytorch_model.bin, no safetensors) with the offline MiniLM's tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    directory = tmp_path / "pickled"
    directory.mkdir()
    model = BertForSequenceClassification(BertConfig(vocab_size=30522, hidden_size=8, num_hidden_layers=1,
                                                     num_attention_heads=1, intermediate_size=8, num_labels=2))
    model.config.save_pretrained(directory)
    torch.save(model.state_dict(), directory / "pytorch_model.bin")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(Path(offline_minilm_path()) / name, directory / name)
    write_card(directory, version="p", labels=["bug", "feature"], kind="transformer", base_model="",
               max_length=32, thresholds=None, metrics=None, data_fingerprint="", train_config=None)
    return directory


def test_the_served_encoder_refuses_a_pickled_checkpoint(pickled_encoder):
    from core.encoder import TransformerClassifier

    with pytest.raises(OSError, match="safetensors|model.safetensors"):
        TransformerClassifier.from_directory(pickled_encoder, ModelCard.read(pickled_encoder), device="cpu")


def test_training_refuses_a_pickled_base_model(pickled_encoder):
    from trainer.config import TrainConfig
    from trainer.train import load_base

    with pytest.raises(ValueError, match="cannot load base model"):
        load_base(TrainConfig(base_model=str(pickled_encoder), max_length=32), ["bug", "feature"])
