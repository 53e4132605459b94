"""push-model then pull-model: a model leaves one registry and serves from another, card included."""

import hashlib
import json

import pytest
import yaml

from core.card import MODEL_CARD, ModelCard, read_card
from core.classifier import load_classifier
from core.encoder import SERVES
from core.engines import FAST_DIR
from core.settings import Settings
from issue_sorter.cli import main
from tests.conftest import ONNX_FIRST
from tests.tiny_model import promote_model
from trainer import publish
from trainer.registry import Registry

TEXTS = ["App crashes with TypeError when saving", "Add a dark mode", "How do I set a proxy?"]


def front_matter(readme: str) -> dict:
    return yaml.safe_load(readme.split("---")[1])


def cli(settings: Settings, *argv) -> int:
    return main([str(arg) for arg in argv], load=lambda **_: settings)


def test_push_then_pull_round_trips_a_model_through_a_directory_and_it_serves(
        tmp_path, tiny_model_dir, database_url, model_dir, capsys):
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
        pulled = Registry(there.model_dir, session).load(hardware=ONNX_FIRST)
        card = read_card(Registry(there.model_dir, session).serving().path)
    assert card["pulled_from"] == {"source": str(published), "revision": None}
    assert card["labels"] == read_card(tiny_model_dir)["labels"]
    original = load_classifier(tiny_model_dir, hardware=ONNX_FIRST)
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


def test_a_pulled_models_onnx_graph_is_built_and_gated_here_never_taken_on_its_publishers_word(
        tmp_path, tiny_model_dir, database_url, model_dir):
    """A card that said its ONNX graph passed the publisher's gate, with the graph's hash beside it
    (both the publisher's to write), made pull-model serve that graph as it came."""
    here = Settings(webhook_secret="", database_url=database_url, model_dir=model_dir)
    version = promote_model(database_url, model_dir, tiny_model_dir)
    published = tmp_path / "published"
    assert cli(here, "push-model", version, published) == 0
    theirs = b"any graph at all: a publisher's word"
    (published / FAST_DIR).mkdir(exist_ok=True)
    (published / FAST_DIR / "model.int8.onnx").write_bytes(theirs)
    card = json.loads((published / MODEL_CARD).read_text())
    card["fast_path"] = {"serves": SERVES, "file": f"{FAST_DIR}/model.int8.onnx", "gate": {"passed": True},
                         "sha256": hashlib.sha256(theirs).hexdigest()}
    (published / MODEL_CARD).write_text(json.dumps(card))

    other_db = f"sqlite:///{tmp_path / 'other.db'}"
    cli(Settings(webhook_secret="", database_url=other_db, model_dir=tmp_path / "m"), "migrate")
    there = Settings(webhook_secret="", database_url=other_db, model_dir=tmp_path / "other-models")
    assert cli(there, "pull-model", published, "--force") == 0
    (pulled,) = [path for path in (tmp_path / "other-models").iterdir() if path.is_dir()]
    record = read_card(pulled)["fast_path"]
    assert "gates" in record  # gated here, engine by engine
    assert all(theirs != path.read_bytes() for path in pulled.rglob("*.onnx"))
    assert record["serves"] == "pytorch" or record["sha256"] != hashlib.sha256(theirs).hexdigest()


def test_a_public_push_of_a_model_trained_on_repositories_issues_is_refused_unless_told_twice(
        tmp_path, tiny_model_dir, database_url, model_dir, capsys):
    """The command `push-model --public` published a model retrained on private repositories' issues (its
    weights and vocabulary can give their words back) without a question."""
    here = Settings(webhook_secret="", database_url=database_url, model_dir=model_dir)
    version = promote_model(database_url, model_dir, tiny_model_dir)  # its card names no data set: a retraining's
    assert cli(here, "push-model", version, tmp_path / "public", "--public") == 1
    error = capsys.readouterr().err
    assert "repositories' issues" in error and f"--public {publish.REPOSITORY_DATA_FLAG}" in error
    assert not (tmp_path / "public").exists()
    assert cli(here, "push-model", version, tmp_path / "private") == 0  # private: no question
    assert cli(here, "push-model", version, tmp_path / "public", "--public", publish.REPOSITORY_DATA_FLAG) == 0


def test_a_public_push_of_a_model_trained_on_a_named_data_set_needs_no_second_flag(
        tmp_path, tiny_model_dir, database_url, model_dir):
    here = Settings(webhook_secret="", database_url=database_url, model_dir=model_dir)
    version = promote_model(database_url, model_dir, tiny_model_dir)
    from core.db import make_sessionmaker

    with make_sessionmaker(database_url)() as session:
        registry = Registry(model_dir, session)
        registry.annotate(registry.model(version), train_data={"source": "nlbse24 issues_train.csv", "issues": 48})
        session.commit()
    assert cli(here, "push-model", version, tmp_path / "public", "--public") == 0
