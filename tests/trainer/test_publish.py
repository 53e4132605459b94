"""push-model then pull-model: a model leaves one registry and serves from another, card included."""

import pytest
import yaml

from core.card import MODEL_CARD, ModelCard, read_card
from core.classifier import load_classifier
from core.settings import Settings
from issue_sorter.cli import main
from tests.conftest import promote_model
from trainer import publish
from trainer.registry import Registry

TEXTS = ["App crashes with TypeError when saving", "Add a dark mode", "How do I set a proxy?"]


def front_matter(readme: str) -> dict:
    return yaml.safe_load(readme.split("---")[1])


def cli(settings: Settings, *argv) -> int:
    return main([str(arg) for arg in argv], load=lambda **_: settings)


def test_push_then_pull_round_trips_a_model_through_a_directory_and_it_serves(
        tmp_path, tiny_model_dir, database_url, model_dir, capsys, onnx_first_cpu):
    # fp32 PyTorch serves both sides (the pulled copy's bf16 gate may pass: on AMX it would serve first)
    here = Settings(webhook_secret="", database_url=database_url, model_dir=model_dir)
    version = promote_model(database_url, model_dir, tiny_model_dir)
    assert cli(here, "push-model", version, tmp_path / "published") == 0
    published = tmp_path / "published"
    readme = (published / "README.md").read_text()
    meta = front_matter(readme)
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2" and meta["license"] == "other"
    assert meta["pipeline_tag"] == "text-classification"
    for section in ("## Training data", "## Evaluation", "## Intended use", "## Limitations", "`question`"):
        assert section in readme
    assert (published / "model.safetensors").is_file() and (published / MODEL_CARD).is_file()

    other_db = f"sqlite:///{tmp_path / 'other.db'}"
    cli(Settings(webhook_secret="", database_url=other_db, model_dir=tmp_path / "m"), "migrate")
    there = Settings(webhook_secret="", database_url=other_db, model_dir=tmp_path / "other-models")
    assert cli(there, "pull-model", published, "--force") == 0
    assert "promoted" in capsys.readouterr().out
    from core.db import make_sessionmaker

    with make_sessionmaker(other_db)() as session:
        pulled = Registry(there.model_dir, session).load()
        card = read_card(Registry(there.model_dir, session).serving().path)
    assert card["pulled_from"] == {"source": str(published), "revision": None}
    assert card["labels"] == read_card(tiny_model_dir)["labels"]
    original = load_classifier(tiny_model_dir)
    for ours, theirs in zip(original.predict(TEXTS), pulled.predict(TEXTS), strict=True):
        assert ours == pytest.approx(theirs, abs=1e-6)


def test_a_directory_that_is_no_issue_sorter_model_is_refused(tmp_path):
    (tmp_path / "random").mkdir()
    with pytest.raises(publish.PublishError, match=MODEL_CARD):
        publish.pull_model(str(tmp_path / "random"))


def test_the_card_says_what_was_not_measured(tfidf_model, tmp_path):
    tfidf_model.save(tmp_path / "t", version="t", metrics={})
    text = publish.model_card_text(ModelCard.read(tmp_path / "t"))
    assert "Not evaluated" in text and front_matter(text)["license"] == "other"


def test_a_directory_with_pickled_weights_is_refused_whatever_its_card(tmp_path, tfidf_model):
    """Before, only pickles by name were refused, so a pytorch_model.bin went through torch.load."""
    tfidf_model.save(tmp_path / "m", version="m")
    (tmp_path / "m" / "pytorch_model.bin").write_bytes(b"\x80\x04pickled")
    with pytest.raises(publish.PublishError, match="not safetensors"):
        publish.pull_model(str(tmp_path / "m"), trust_pickle=True)
