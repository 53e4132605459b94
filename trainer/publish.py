"""Models leaving and entering the registry: push a version to the Hugging Face hub (or a directory) with a
real model card, pull a published one back in.

The hub calls are `huggingface_hub`'s own (`HfApi.create_repo`, `upload_folder`, `model_info`,
`snapshot_download`); a local directory works wherever a hub id does. A pulled model's file list is checked
before anything downloads: weights are safetensors only, pickles are refused. Every hub failure is one
`PublishError` line naming the repository and the fix.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from core.card import MODEL_CARD, ModelCard, base_model_name

log = logging.getLogger(__name__)

PICKLES = (".joblib", ".pkl", ".pickle")  # files that run code when loaded (an old TF-IDF member)
# weights in any format but safetensors: .bin/.pt/.pth/.ckpt go through torch.load, which unpickles
UNSAFE_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".keras")
HUB_README = "README.md"
UNSEEN = "unseen-repositories"  # metrics["protocol"] when the held-out issues are projects never trained on
DATA_NOTES = {  # what the bootstrap data is and its terms, for the card's "Training data"
    "nlbse24": "NLBSE'24 issue report classification (1,500 training issues of 5 repositories: bug, feature, "
               "question). The organisers grant no explicit licence; the text is public GitHub issues.",
    "open-index/open-github-issues": "open-index/open-github-issues on the Hugging Face hub (issues of the "
                                     "lesson's 8 training projects, labels mapped to bug/feature/question/docs); "
                                     "see its dataset card for its terms.",
}


REPOSITORY_DATA_FLAG = "--include-repository-data"  # push-model's second word for a public push of such a model


class PublishError(ValueError):
    """A model cannot be published or pulled as asked; the message names the fix."""


def is_local(target: str) -> bool:
    """A path (absolute, ./relative, or an existing directory) rather than a hub id `owner/name`."""
    return target.startswith((".", "/", "~")) or Path(target).expanduser().is_dir()


def is_trained_on_public_data_only(card: ModelCard) -> bool:
    """Whether the card says its training issues came from a file or the hub (`train` and `bootstrap-model`
    record it): a retraining's (repositories' issues in the database) and one that says nothing do not."""
    return bool(((card.extra or {}).get("train_data") or {}).get("source"))


def push_model(model_dir: Path, card: ModelCard, target: str, *, private: bool = True,
               include_repository_data: bool = False, api=None) -> str:
    """Publish a registered model directory (whose card is `card`) with a Hugging Face model card (README.md);
    returns where: the directory, or the repository's URL as the hub returned it (created private unless
    `private` is off). A public push of a model that may have learnt from repositories' issues is refused
    unless `include_repository_data` says the operator means it: its weights and TF-IDF vocabulary can give
    back words of those issues, private repositories' included."""
    if not private and not include_repository_data and not is_trained_on_public_data_only(card):
        raise PublishError(
            f"{card.version} may have learnt from repositories' issues in the database (its card names no file "
            "or hub data set it was trained on, as a retraining's never does): published publicly, its weights "
            "and vocabulary could give back their text, private repositories' included. Push it private "
            f"(without --public), or say you mean it: --public {REPOSITORY_DATA_FLAG}")
    with tempfile.TemporaryDirectory(prefix="issue-sorter-push-") as staging:
        folder = Path(staging) / card.version
        shutil.copytree(model_dir, folder)
        (folder / HUB_README).write_text(model_card_text(card))
        if is_local(target):
            destination = Path(target).expanduser()
            shutil.copytree(folder, destination, dirs_exist_ok=True)
            return str(destination)
        from huggingface_hub import HfApi

        api = api or HfApi()
        with _explained("push to", target, None):
            url = api.create_repo(target, repo_type="model", private=private, exist_ok=True)
            api.upload_folder(repo_id=url.repo_id, folder_path=str(folder), repo_type="model",
                              commit_message=f"Issue Sorter model {card.version}")
        return str(url)


def pull_model(source: str, *, revision: str | None = None, trust_pickle: bool = False,
               say: Callable[[str], None] = log.info, api=None) -> Path:
    """A published model as a local directory, checked to be an Issue Sorter model in safetensors; a hub
    model's file list is checked before it downloads. Register it next."""
    if is_local(source):
        directory = Path(source).expanduser()
        check_files([str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()], source,
                    trust_pickle=trust_pickle)
        return directory
    from huggingface_hub import HfApi, snapshot_download

    api = api or HfApi()
    with _explained("pull", source, revision):
        info = api.model_info(source, revision=revision)
        names = [sibling.rfilename for sibling in info.siblings or []]
        check_files(names, source, trust_pickle=trust_pickle)
        say(f"hub: downloading {len(names)} files of {source} at {info.sha}")
        return Path(snapshot_download(source, revision=info.sha))  # the commit checked, not what main is now


def check_files(names: Iterable[str], source: str, *, trust_pickle: bool = False) -> None:
    """Refuse a model with weights other than safetensors, pickles (unless trusted) or no card."""
    names = list(names)
    unsafe = sorted(name for name in names if name.endswith(UNSAFE_WEIGHTS))
    if unsafe:
        raise PublishError(f"{source} holds weights that are not safetensors ({', '.join(unsafe)}); Issue Sorter "
                           "loads safetensors only: publish it with `issue-sorter push-model`")
    pickles = sorted(name for name in names if name.endswith(PICKLES))
    if pickles and not trust_pickle:
        raise PublishError(f"{source} holds pickled files ({', '.join(pickles)}), which run code when loaded; "
                           "pull it only from a publisher you trust, with --trust-pickle")
    if MODEL_CARD not in names:
        raise PublishError(f"{source} is not an Issue Sorter model: it has no {MODEL_CARD} "
                           "(publish one with `issue-sorter push-model`)")


def as_unseen(metrics: dict, repos: Sequence[str]) -> dict:
    """Metrics measured on whole projects never trained on, named as the unseen-repository protocol."""
    summary = {key: metrics[key] for key in ("mean_repo_macro_f1", "macro_f1", "n_scored") if key in metrics}
    return metrics | {"protocol": UNSEEN, "unseen": summary | {"repos": list(repos)}}


def origin(source: str, revision: str | None, *, downloaded: Path | None = None) -> dict[str, str | None]:
    """Where a pulled model came from, for its registered copy's card (`pulled_from`): for a hub model, the
    commit it was read at (the hub cache's snapshot directory names it), so `pull-model --revision` gets
    exactly it again."""
    from trainer.dataset import snapshot_revision

    commit = snapshot_revision(downloaded) if downloaded else None
    return {"source": source, "revision": commit or revision}


@contextlib.contextmanager
def _explained(action: str, repo_id: str, revision: str | None) -> Iterator[None]:
    """Turns what the hub answers into one PublishError line naming the repository and the fix."""
    try:
        yield
    except PublishError:
        raise
    except Exception as error:
        message = _hub_failure(action, repo_id, revision, error)
        if message is None:
            raise
        raise PublishError(message) from None


def _hub_failure(action: str, repo_id: str, revision: str | None, error: Exception) -> str | None:
    import httpx2
    from huggingface_hub import constants, errors

    where = f"hub: {action} {repo_id} at {constants.ENDPOINT}"
    login = "log in with `hf auth login` or set HF_TOKEN"
    if isinstance(error, errors.RevisionNotFoundError):
        return f"{where}: no revision {revision}; pass --revision with a branch, tag or commit it has"
    if isinstance(error, errors.RepositoryNotFoundError):
        return f"{where}: no such model, or it is private and no token reaches it; check the id, or {login}"
    if isinstance(error, errors.HfHubHTTPError) and error.response is not None:
        status = error.response.status_code
        fix = f"{login} with a token that may write to it" if status in (401, 403) else "retry later"
        return f"{where}: the hub answered {status} ({_first_line(error)}); {fix}"
    if isinstance(error, httpx2.HTTPError | errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled):
        return f"{where}: the hub cannot be reached ({type(error).__name__}); connect and retry"
    return None


def _first_line(error: Exception) -> str:
    lines = [line for line in str(error).splitlines() if line.strip() and "For more information" not in line]
    return lines[0][:200] if lines else type(error).__name__


def model_card_text(card: ModelCard) -> str:
    """A Hugging Face model card: metadata for the hub, then what a user needs to judge the model."""
    from huggingface_hub import ModelCard as HubCard
    from huggingface_hub import ModelCardData

    data = ModelCardData(language="en", license="other", library_name="transformers",
                         pipeline_tag="text-classification", tags=["github-issues", "issue-sorter"],
                         base_model=_hub_base_model(card), metrics=["f1"])
    return str(HubCard(f"---\n{data.to_yaml()}\n---\n\n" + _body(card)))


def _body(card: ModelCard) -> str:
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
        f"- base model: {_hub_base_model(card) or ('a local model' if card.base_model else 'unknown')}",
        f"- tokens read per issue: {card.max_length}",
        f"- recipe: {', '.join(f'{k}={v}' for k, v in sorted(recipe.items()) if v is not None) or 'not recorded'}",
        f"- training data fingerprint: `{card.data_fingerprint or 'not recorded'}`", "",
        "## Training data", "", _data_note(card), "",
        "## Evaluation", "", *_metric_lines(card.metrics), "",
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
    if metrics.get("protocol") == UNSEEN:
        return _unseen_lines(metrics)
    lines = [f"- NLBSE'24 protocol (test split of the training repositories): mean per-repository macro-F1 "
             f"{metrics['mean_repo_macro_f1']:.3f}, macro-F1 {metrics['macro_f1']:.3f} on {metrics.get('n_scored')} "
             "issues" if "mean_repo_macro_f1" in metrics else "- NLBSE'24 protocol: not measured"]
    unseen = metrics.get("unseen")
    lines.append(f"- Unseen-repository protocol: mean per-repository macro-F1 {unseen['mean_repo_macro_f1']:.3f}"
                 if unseen else "- Unseen-repository protocol (repositories left out of training): not measured "
                                "for this version")
    return lines + _per_label_lines(metrics)


def _unseen_lines(metrics: dict) -> list[str]:
    """Figures on projects never trained on: the unseen-repository protocol, each project's own."""
    repos = (metrics.get("unseen") or {}).get("repos") or sorted(metrics.get("per_repo") or {})
    lines = [f"- Unseen-repository protocol ({len(repos)} projects never trained on): mean per-repository "
             f"macro-F1 {metrics['mean_repo_macro_f1']:.3f}, macro-F1 {metrics['macro_f1']:.3f} on "
             f"{metrics.get('n_scored')} issues"]
    lines += [f"  - {repo}: macro-F1 {row['macro_f1']:.3f} on {row.get('n')} issues"
              for repo, row in sorted((metrics.get("per_repo") or {}).items())]
    lines.append("- NLBSE'24 protocol (test split of the training repositories): not measured for this version")
    return lines + _per_label_lines(metrics)


def _per_label_lines(metrics: dict) -> list[str]:
    return [f"- {label}: precision {row['precision']:.3f}, recall {row['recall']:.3f}, F1 {row['f1']:.3f}"
            for label, row in (metrics.get("per_label") or {}).items()]


def _data_note(card: ModelCard) -> str:
    source = ((card.extra or {}).get("train_data") or {}).get("source", "")
    for key, note in DATA_NOTES.items():
        if key in source:
            return note
    return "Issues whose labels maintainers confirmed through Issue Sorter" if source == "database" else (
        f"{source or 'Not recorded'}.")


def _hub_base_model(card: ModelCard) -> str | None:
    """Its base model's hub id; None for a directory of this machine (its path is not published)."""
    base = base_model_name(card.base_model)  # older cards hold the offline MiniLM's local path
    return base if base.count("/") == 1 and not base.startswith(("/", ".", "~")) else None
