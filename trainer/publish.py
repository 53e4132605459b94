"""Models leaving and entering the registry: push a version to the Hugging Face hub (or a directory) with a
real model card, pull a published one back in.

The hub calls are `huggingface_hub`'s own (`HfApi.upload_folder`, `snapshot_download`), passed in so
tests use local directories; a local directory works wherever a hub id does.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from core.card import MODEL_CARD, ModelCard, update_card

Uploader = Callable[..., object]  # HfApi().upload_folder(repo_id=, folder_path=, repo_type=, commit_message=)
Downloader = Callable[..., str]  # snapshot_download(repo_id, revision=) → local directory
PICKLES = ("*.joblib", "*.pkl", "*.pickle")  # files that run code when loaded
HUB_README = "README.md"
DATA_NOTES = {  # what the bootstrap data is and its terms, for the card's "Training data"
    "nlbse24": "NLBSE'24 issue report classification (1,500 training issues of 5 repositories: bug, feature, "
               "question). The organisers grant no explicit licence; the text is public GitHub issues.",
    "open-index/open-github-issues": "open-index/open-github-issues on the Hugging Face hub (issues of the "
                                     "lesson's 8 training projects, labels mapped to bug/feature/question/docs); "
                                     "see its dataset card for its terms.",
}


class PublishError(ValueError):
    """A model cannot be published or pulled as asked; the message names the fix."""


def is_local(target: str) -> bool:
    """A path (absolute, ./relative, or an existing directory) rather than a hub id `owner/name`."""
    return target.startswith((".", "/", "~")) or Path(target).expanduser().is_dir()


def push_model(model_dir: Path, target: str, *, upload: Uploader | None = None) -> str:
    """Publish a registered model directory with a Hugging Face model card (README.md); returns where."""
    card = ModelCard.read(model_dir)
    with tempfile.TemporaryDirectory(prefix="issue-sorter-push-") as staging:
        folder = Path(staging) / card.version
        shutil.copytree(model_dir, folder)
        (folder / HUB_README).write_text(model_card_text(card))
        if is_local(target):
            destination = Path(target).expanduser()
            shutil.copytree(folder, destination, dirs_exist_ok=True)
            return str(destination)
        upload = upload or _hub_uploader()
        upload(repo_id=target, folder_path=str(folder), repo_type="model",
               commit_message=f"Issue Sorter model {card.version}")
        return f"https://huggingface.co/{target}"


def pull_model(source: str, *, revision: str | None = None, download: Downloader | None = None,
               trust_pickle: bool = False) -> Path:
    """A published model as a local directory, checked to be an Issue Sorter model; register it next."""
    if is_local(source):
        directory = Path(source).expanduser()
    else:
        download = download or _hub_downloader()
        directory = Path(download(repo_id=source, revision=revision))
        pickles = sorted(str(p.relative_to(directory)) for pattern in PICKLES for p in directory.rglob(pattern))
        if pickles and not trust_pickle:
            raise PublishError(f"{source} holds pickled files ({', '.join(pickles)}), which run code when loaded; "
                               "pull it only from a publisher you trust, with --trust-pickle")
    if not (directory / MODEL_CARD).is_file():
        raise PublishError(f"{source} is not an Issue Sorter model: it has no {MODEL_CARD} "
                           "(publish one with `issue-sorter push-model`)")
    return directory


def record_origin(directory: Path, source: str, revision: str | None, *, downloaded: Path | None = None) -> None:
    """Note in the registered copy's card where it came from: for a hub model, the commit it was read at
    (the hub cache's snapshot directory names it), so `pull-model --revision` gets exactly it again."""
    from trainer.dataset import snapshot_revision

    commit = snapshot_revision(downloaded / "x") if downloaded else None
    update_card(directory, pulled_from={"source": source, "revision": commit or revision})


def model_card_text(card: ModelCard) -> str:
    """A Hugging Face model card: metadata for the hub, then what a user needs to judge the model."""
    from huggingface_hub import ModelCard as HubCard
    from huggingface_hub import ModelCardData

    metrics = card.metrics
    data = ModelCardData(language="en", license="other", library_name="transformers",
                         pipeline_tag="text-classification", tags=["github-issues", "issue-sorter"],
                         base_model=_hub_base_model(card), metrics=["f1"])
    return str(HubCard(f"---\n{data.to_yaml()}\n---\n\n" + _body(card, metrics)))


def _body(card: ModelCard, metrics: dict) -> str:
    labels = ", ".join(f"`{label}`" for label in card.labels)
    recipe = card.train_config
    return "\n".join([
        f"# Issue Sorter model {card.version}", "",
        "Sorts a new GitHub issue (title and body) into one of its labels: " + labels + ". Made by "
        "[Issue Sorter](https://github.com/issue-sorter/issue-sorter), a GitHub App that labels issues and "
        "learns from maintainers' corrections.", "",
        "## Model", "",
        f"- kind: {card.kind}" + (f" (encoder + TF-IDF, TF-IDF share {card.tfidf_share})"
                                  if card.kind == "blend" else ""),
        f"- base model: {card.base_model or 'unknown'}",
        f"- tokens read per issue: {card.max_length}",
        f"- recipe: {', '.join(f'{k}={v}' for k, v in sorted(recipe.items()) if v is not None) or 'not recorded'}",
        f"- training data fingerprint: `{card.data_fingerprint or 'not recorded'}`", "",
        "## Training data", "", _data_note(card), "",
        "## Evaluation", "", *_metric_lines(metrics), "",
        "## Intended use", "",
        "Suggesting or applying a first label to new issues of software repositories, with a maintainer "
        "reviewing. The App abstains below a confidence threshold and learns from what maintainers keep.", "",
        "## Limitations", "",
        "- Trained on English issues of open-source projects; other languages and domains are untested.",
        "- Repositories it never saw score lower than its test split: judge it on your own issues first "
        "(Issue Sorter's `mode: shadow` or `suggest`).",
        "- Issue text carries the reporters' words; the model may echo their biases. Never use it to judge people.",
        "- The TF-IDF member is saved as JSON and NumPy arrays (no pickle): loading it runs no code.",
        "",
    ])


def _metric_lines(metrics: dict) -> list[str]:
    if not metrics:
        return ["Not evaluated when it was registered."]
    lines = [f"- NLBSE'24 protocol (test split of the training repositories): mean per-repository macro-F1 "
             f"{metrics['mean_repo_macro_f1']:.3f}, macro-F1 {metrics['macro_f1']:.3f} on {metrics.get('n_scored')} "
             "issues" if "mean_repo_macro_f1" in metrics else "- NLBSE'24 protocol: not measured"]
    unseen = metrics.get("unseen")
    lines.append(f"- Unseen-repository protocol: mean per-repository macro-F1 {unseen['mean_repo_macro_f1']:.3f}"
                 if unseen else "- Unseen-repository protocol (repositories left out of training): not measured "
                                "for this version")
    per_label = metrics.get("per_label") or {}
    lines += [f"- {label}: precision {row['precision']:.3f}, recall {row['recall']:.3f}, F1 {row['f1']:.3f}"
              for label, row in per_label.items()]
    return lines


def _data_note(card: ModelCard) -> str:
    source = ((card.extra or {}).get("train_data") or {}).get("source", "")
    for key, note in DATA_NOTES.items():
        if key in source:
            return note
    return "Issues whose labels maintainers confirmed through Issue Sorter" if source == "database" else (
        f"{source or 'Not recorded'}.")


def _hub_base_model(card: ModelCard) -> str | None:
    base = card.base_model
    if "all-minilm-l6-v2" in base.lower() or "all_minilm_l6_v2" in base.lower():
        return "sentence-transformers/all-MiniLM-L6-v2"  # the offline package ships this hub model's weights
    return base if base.count("/") == 1 and not base.startswith("/") else None


def _hub_uploader() -> Uploader:
    from huggingface_hub import HfApi

    return HfApi().upload_folder


def _hub_downloader() -> Downloader:
    from huggingface_hub import snapshot_download

    return snapshot_download
