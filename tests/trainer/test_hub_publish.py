"""push-model and pull-model through real `huggingface_hub` calls against the hub stand-in: the repository
created private, the URL the hub gave, a round trip byte for byte, the file list checked before anything
downloads (safetensors only, no pickles), and one line for every failure."""

import hashlib

import pytest

from core.card import MODEL_CARD, ModelCard, read_card, write_card
from core.settings import Settings
from issue_sorter.cli import main
from tests.tiny_model import promote_model
from trainer import publish

REPO = "octo/issue-sorter-model"


def cli(settings: Settings, *argv) -> int:
    return main([str(arg) for arg in argv], load=lambda **_: settings)


@pytest.fixture
def published_version(tfidf_model, tmp_path, database_url, model_dir):
    """A TF-IDF model registered and serving here (no encoder to fine-tune: these tests are about moving it)."""
    tfidf_model.save(tmp_path / "source", version="t", metrics={})
    return promote_model(database_url, model_dir, tmp_path / "source")


@pytest.fixture
def here(database_url, model_dir) -> Settings:
    return Settings(webhook_secret="", database_url=database_url, model_dir=model_dir)


@pytest.fixture
def there(tmp_path) -> Settings:
    from core.db import Base, make_sessionmaker

    url = f"sqlite:///{tmp_path / 'there.db'}"
    Base.metadata.create_all(make_sessionmaker(url).kw["bind"])
    return Settings(webhook_secret="", database_url=url, model_dir=tmp_path / "there-models")


def one_error_line(capsys) -> str:
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert line.startswith("error: ")
    return line


def test_push_creates_a_private_repository_and_prints_the_url_the_hub_gave(hub, here, published_version,
                                                                           model_dir, capsys):
    assert cli(here, "push-model", published_version, REPO) == 0
    assert f"published {published_version} to {hub.url}/{REPO}" in capsys.readouterr().out
    repo = hub.repos["model", REPO]
    assert repo.private
    files = hub.files(REPO)
    assert MODEL_CARD in files and "README.md" in files
    assert cli(here, "push-model", published_version, REPO) == 0  # it exists now: pushed to again
    assert len(repo.commits) == 3  # the hub's initial commit, then one per push


def test_a_pushed_model_is_pulled_back_byte_for_byte_and_serves(hub, here, there, published_version, model_dir,
                                                                capsys):
    cli(here, "push-model", published_version, REPO)
    pushed = hub.files(REPO)
    assert cli(there, "pull-model", REPO, "--force") == 0
    out = capsys.readouterr().out
    assert f"hub: downloading {len(pushed)} files of {REPO} at {hub.repos['model', REPO].refs['main']}" in out
    assert "promoted" in out
    from core.db import make_sessionmaker
    from trainer.registry import Registry

    with make_sessionmaker(there.database_url)() as session:
        row = Registry(there.model_dir, session).serving()
    pulled = {path.name: path.read_bytes() for path in __import__("pathlib").Path(row.path).iterdir()
              if path.is_file()}
    for name, data in pushed.items():
        if name not in (MODEL_CARD, ".gitattributes"):  # the card gains where it came from
            assert hashlib.sha256(pulled[name]).hexdigest() == hashlib.sha256(data).hexdigest(), name
    assert read_card(row.path)["pulled_from"] == {"source": REPO, "revision": hub.repos["model", REPO].refs["main"]}


def test_a_push_the_hub_refuses_is_one_line_saying_how_to_log_in(hub, here, published_version, capsys):
    hub.token = "hf_s3cret"  # writes need it; this machine has none
    assert cli(here, "push-model", published_version, REPO) == 1
    line = one_error_line(capsys)
    assert REPO in line and hub.url in line and "401" in line and "hf auth login" in line


def test_a_push_with_the_token_goes_through(hub, here, published_version, monkeypatch, capsys):
    hub.token = "hf_s3cret"
    monkeypatch.setenv("HF_TOKEN", "hf_s3cret")
    assert cli(here, "push-model", published_version, REPO, "--public", publish.REPOSITORY_DATA_FLAG) == 0
    assert not hub.repos["model", REPO].private
    assert "hf_s3cret" not in capsys.readouterr().out


def test_an_unknown_model_or_revision_is_one_line_naming_the_fix(hub, there, published_version, here, capsys):
    assert cli(there, "pull-model", "octo/nothing-here") == 1
    line = one_error_line(capsys)
    assert "octo/nothing-here" in line and "check the id" in line
    cli(here, "push-model", published_version, REPO)
    capsys.readouterr()
    assert cli(there, "pull-model", REPO, "--revision", "v9") == 1
    line = one_error_line(capsys)
    assert "no revision v9" in line and "--revision" in line


def fake_model_files(**extra: bytes) -> dict[str, bytes]:
    return {MODEL_CARD: b'{"version": "m", "labels": ["bug"], "kind": "transformer"}', "config.json": b"{}",
            **extra}


@pytest.mark.parametrize("weights", ["pytorch_model.bin", "model.pt", "encoder/training_args.pth"])
def test_pull_refuses_weights_that_are_not_safetensors_before_downloading_anything(hub, weights):
    hub.add_files(REPO, fake_model_files(**{weights: b"\x80\x04pickled weights"}), kind="model")
    with pytest.raises(publish.PublishError, match=f"not safetensors \\({weights}\\)"):
        publish.pull_model(REPO)
    assert not [path for _, path in hub.requests if "/resolve/" in path or path.startswith("/cdn/")]


def test_a_pickled_tfidf_member_is_refused_unless_trusted(hub):
    hub.add_files(REPO, fake_model_files(**{"tfidf/pipeline.joblib": b"\x80\x04pickle"}), kind="model")
    with pytest.raises(publish.PublishError, match="--trust-pickle"):
        publish.pull_model(REPO)
    assert (publish.pull_model(REPO, trust_pickle=True) / "tfidf" / "pipeline.joblib").is_file()


def test_a_model_without_a_card_is_refused_by_its_file_list(hub):
    hub.add_files(REPO, {"model.safetensors": b"weights", "config.json": b"{}"}, kind="model")
    with pytest.raises(publish.PublishError, match=f"no {MODEL_CARD}"):
        publish.pull_model(REPO)
    assert not [path for _, path in hub.requests if "/resolve/" in path]


def test_a_hub_trained_card_reports_the_unseen_protocol_per_project_and_names_the_base_by_hub_id(tmp_path):
    from trainer.config import offline_minilm_path

    per_repo = {"moby/moby": {"macro_f1": 0.61, "n": 40}, "vuejs/core": {"macro_f1": 0.55, "n": 30}}
    metrics = publish.as_unseen({"mean_repo_macro_f1": 0.58, "macro_f1": 0.6, "n_scored": 70,
                                 "per_repo": per_repo}, ["moby/moby", "vuejs/core"])
    write_card(tmp_path, version="m", labels=["bug", "feature"], kind="transformer",
               base_model=str(offline_minilm_path()), max_length=64, thresholds=None, metrics=metrics,
               data_fingerprint="", train_config=None)
    card = ModelCard.read(tmp_path)
    text = publish.model_card_text(card)
    assert card.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert str(offline_minilm_path()) not in text and "base model: sentence-transformers/all-MiniLM-L6-v2" in text
    assert "Unseen-repository protocol (2 projects never trained on): mean per-repository macro-F1 0.580" in text
    assert "moby/moby: macro-F1 0.610 on 40 issues" in text and "vuejs/core: macro-F1 0.550" in text
    assert "NLBSE'24 protocol (test split of the training repositories): not measured" in text
    assert metrics["unseen"]["mean_repo_macro_f1"] == 0.58  # what the review page's quality table reads


def test_push_and_pull_with_the_hub_unreachable_are_one_line_each(hub, here, there, published_version, capsys):
    hub.stop()
    assert cli(here, "push-model", published_version, REPO) == 1
    assert "cannot be reached" in one_error_line(capsys)
    assert cli(there, "pull-model", REPO) == 1
    line = one_error_line(capsys)
    assert "cannot be reached" in line and REPO in line and hub.url in line
