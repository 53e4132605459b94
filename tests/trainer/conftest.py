"""Trainer test fixtures: real NLBSE issues, the real offline MiniLM, a tiny BERT, a temp database."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.db import make_sessionmaker
from tests.conftest import IN_CI, with_tables
from tests.paths import NLBSE
from tests.trainer.hub_stand_in import hub  # noqa: F401 - the hub stand-in fixture
from trainer.baseline import train_tfidf
from trainer.config import TrainConfig, offline_minilm_path
from trainer.dataset import Example, load_file
from trainer.fast_path import FastPathOptions, default_gate_issues
from trainer.registry import Registry
from trainer.train import fine_tune

NO_FAST_PATH = FastPathOptions(build=False)  # for tests not about it: tests/trainer/test_fast_path.py builds it


def balanced(examples: list[Example], per_repo_label: int) -> list[Example]:
    """The first `per_repo_label` issues of every (repository, label): small, yet every class is there."""
    taken: dict[tuple, int] = {}
    chosen = []
    for example in examples:
        key = (example.repo, example.label)
        if taken.get(key, 0) < per_repo_label:
            taken[key] = taken.get(key, 0) + 1
            chosen.append(example)
    return chosen


def _nlbse(name: str) -> list[Example]:
    path = NLBSE / name
    if not path.is_file():
        if IN_CI:
            pytest.fail(f"NLBSE data not found at {path}: CI must have ../shared beside the checkout")
        pytest.skip(f"NLBSE data not found at {path} (set ISSUE_SORTER_SHARED to the shared folder)")
    return load_file(path)


@pytest.fixture
def without_shared(monkeypatch, tmp_path):
    """No ../shared, as an installed package or a container has it: a registration's fast path is gated on
    the issues it held out instead of NLBSE'24's 1,500 test issues (whose choice test_fast_path.py tests)."""
    monkeypatch.setenv("ISSUE_SORTER_SHARED", str(tmp_path / "no-shared"))
    default_gate_issues.cache_clear()  # read once per process: here it must read the variable again
    yield
    default_gate_issues.cache_clear()


@pytest.fixture(scope="session")
def nlbse_train() -> list[Example]:
    return _nlbse("issues_train.csv")


@pytest.fixture(scope="session")
def nlbse_test() -> list[Example]:
    return _nlbse("issues_test.csv")


@pytest.fixture(scope="session")
def small_train(nlbse_train) -> list[Example]:
    """30 real issues: 2 per (repository, label)."""
    return balanced(nlbse_train, 2)


@pytest.fixture(scope="session")
def small_heldout(nlbse_test) -> list[Example]:
    """45 real issues from the test split: 3 per (repository, label)."""
    return balanced(nlbse_test, 3)


@pytest.fixture(scope="session")
def minilm_config() -> TrainConfig:
    """The offline MiniLM, 32 tokens, one short epoch: seconds on 2 cores."""
    return TrainConfig(max_length=32, epochs=1, batch_size=8)


@pytest.fixture(scope="session")
def minilm_path() -> str:
    return offline_minilm_path()


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory, minilm_path) -> Path:
    """A randomly initialised 2-layer BERT saved as a local directory, with MiniLM's tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    directory = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def trained_minilm(minilm_config, small_train):
    """One fine-tuned MiniLM shared by the tests that only read it."""
    return fine_tune(minilm_config, small_train, progress=False)


@pytest.fixture(scope="session")
def tfidf_model(nlbse_train):
    """The baseline on 300 real issues (20 per repository and label)."""
    return train_tfidf(balanced(nlbse_train, 20))


@pytest.fixture
def database_url(tmp_path, empty_schema) -> str:
    """A fresh SQLite file with every table (the tests' stand-in for `alembic upgrade head`)."""
    return with_tables(f"sqlite:///{tmp_path / 'issue-sorter.db'}", empty_schema)


@pytest.fixture
def session(database_url):
    session = make_sessionmaker(database_url)()
    yield session
    session.close()


@pytest.fixture
def model_dir(tmp_path) -> Path:
    return tmp_path / "models"


@pytest.fixture
def registry(model_dir, session) -> Registry:
    return Registry(model_dir, session)
