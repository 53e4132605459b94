"""TrainConfig: the lesson's recipe as defaults, and a lossless round trip through the model card."""

import dataclasses
import inspect
from pathlib import Path

import pytest

from trainer.config import TrainConfig


def test_defaults_are_the_lessons_recipe():
    config = TrainConfig()
    assert (config.lr, config.weight_decay, config.warmup_ratio, config.grad_clip) == (3e-5, 0.01, 0.1, 1.0)
    assert (config.epochs, config.batch_size, config.max_length, config.seed) == (2, 16, 256, 42)
    assert (config.max_steps, config.device, config.truncation, config.fp16) == (None, "auto", "head", True)


def test_every_field_has_a_default_and_a_comment():
    source = inspect.getsource(TrainConfig)
    for field in dataclasses.fields(TrainConfig):
        assert field.default is not dataclasses.MISSING, field.name
        line = next(line for line in source.splitlines() if line.strip().startswith(f"{field.name}:"))
        assert "#" in line, f"{field.name} has no comment"


def test_round_trip_through_a_dict():
    config = TrainConfig(base_model="answerdotai/ModernBERT-base", max_length=512, truncation="head+tail",
                         max_steps=10)
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_unknown_fields_and_values_are_refused():
    with pytest.raises(ValueError, match="unknown TrainConfig fields: learning_rate"):
        TrainConfig.from_dict({"learning_rate": 1e-4})
    with pytest.raises(ValueError, match="truncation must be one of"):
        TrainConfig(truncation="tail")


def test_base_model_defaults_to_the_offline_minilm(minilm_path):
    assert TrainConfig().resolved_base_model() == minilm_path
    assert (Path(minilm_path) / "config.json").is_file()
    hub_id = "FacebookAI/roberta-base"
    assert TrainConfig(base_model=hub_id).resolved_base_model() == hub_id
    assert TrainConfig(device="cpu").resolved_device() == "cpu"
