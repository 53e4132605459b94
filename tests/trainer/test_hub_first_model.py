"""A fresh clone without ../shared, as a new user has it: `bootstrap-model` reads the lesson's data set
through the hub stand-in, trains and promotes the first model, and the model travels to another machine
with push-model / pull-model, its publisher's fast path kept. A small data set; the real recipe's code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.card import ModelCard, read_card
from tests.trainer.test_hub_data import publish_dataset
from trainer import publish
from trainer.dataset import TEST_REPOS


def issue_sorter(env: dict, *argv: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "issue_sorter.cli", *argv], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def machine(tmp_path: Path, name: str) -> dict:
    """The environment of a machine of its own: database, model root, no ../shared."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISSUE_SORTER_BOOTSTRAP")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / f'{name}.db'}", MODEL_DIR=str(tmp_path / f"{name}-models"),
               ISSUE_SORTER_SHARED=str(tmp_path / "no-shared"))  # HF_ENDPOINT, HF_HOME: the hub fixture's
    issue_sorter(env, "migrate")
    return env


@pytest.mark.e2e  # `issue-sorter` in processes of its own, as a user runs it
@pytest.mark.slow  # fine-tunes MiniLM (one step) and builds its fast path
def test_a_fresh_clone_reaches_a_promoted_model_through_the_hub_and_moves_it_to_another_machine(hub, tmp_path):
    commit = publish_dataset(hub)
    first = machine(tmp_path, "first")
    out = issue_sorter(first, "bootstrap-model", "--revision", commit, "--max-steps", "1", "--max-length", "32",
                       "--no-progress").stdout
    assert "hub: python/cpython (1 of 13)" in out and "hub: vuejs/core (13 of 13)" in out
    assert "promoted" in out and "unseen-repository mean-repo macro-F1" in out
    listing = issue_sorter(first, "models").stdout
    (served,) = [line.split()[1] for line in listing.splitlines() if line.startswith("*")]
    directory = Path(first["MODEL_DIR"]) / served
    card = ModelCard.read(directory)
    assert f"@{commit}" in card.extra["train_data"]["source"]  # the data set's commit it read
    assert card.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert card.metrics["protocol"] == publish.UNSEEN and set(card.metrics["per_repo"]) == set(TEST_REPOS)

    out = issue_sorter(first, "push-model", served, "octo/first-model").stdout
    assert f"to {hub.url}/octo/first-model" in out and hub.repos["model", "octo/first-model"].private
    readme = hub.files("octo/first-model")["README.md"].decode()
    assert "Unseen-repository protocol (5 projects never trained on)" in readme and str(tmp_path) not in readme

    second = machine(tmp_path, "second")
    issue_sorter(second, "pull-model", "octo/first-model", "--force")
    listing = issue_sorter(second, "models").stdout
    (pulled,) = [line.split()[1] for line in listing.splitlines() if line.startswith("*")]
    pulled_card = read_card(Path(second["MODEL_DIR"]) / pulled)
    # the publisher's graph never serves on its word: this machine has no issues to gate one on, so PyTorch
    # serves the safetensors weights, and the publisher's graphs are gone
    assert json.loads((directory / "issue_sorter.json").read_text())["fast_path"]["serves"] != "pytorch"
    assert pulled_card["fast_path"]["serves"] == "pytorch"
    assert pulled_card["fast_path"]["gate"] == {"passed": False, "reason": "no held-out issues"}
    assert not (Path(second["MODEL_DIR"]) / pulled / "fast").exists()
