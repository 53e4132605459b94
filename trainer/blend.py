"""An encoder blended with the TF-IDF model trained on the same issues: the recipe's last step.

The fine-tuned encoder and TF-IDF + logistic regression make different mistakes; averaging their
probabilities beat either alone on every validation split we tried (docs/BENCHMARKS.md, "Quality").
A blend is saved as one registry version with each member in its own subdirectory, and served by
`bot.classifier.BlendedClassifier`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.classifier import BLEND_MEMBERS, BlendedClassifier, blend_scores
from trainer.baseline import TrainedBaseline, train_tfidf
from trainer.card import write_card
from trainer.config import TrainConfig
from trainer.dataset import Example
from trainer.evaluate import mean_repo_macro_f1, top_label
from trainer.train import TrainedModel, fine_tune

SHARE_GRID = tuple(round(0.1 * i, 1) for i in range(11))  # TF-IDF shares `choose_tfidf_share` tries


@dataclass
class TrainedBlend:
    """A fine-tuned encoder and a TF-IDF model, trained on the same issues, and the TF-IDF share."""

    encoder: TrainedModel
    tfidf: TrainedBaseline
    tfidf_share: float

    @property
    def labels(self) -> list[str]:
        return self.encoder.labels

    @property
    def config(self) -> TrainConfig:
        return self.encoder.config

    @property
    def seconds(self) -> float:
        return self.encoder.seconds + self.tfidf.seconds

    @property
    def steps(self) -> int:
        return self.encoder.steps

    def save(self, directory: Path | str, *, version: str, metrics: dict | None = None,
             thresholds: dict[str, float] | None = None, data_fingerprint: str = "") -> Path:
        """Each member in its subdirectory, and a card of kind "blend" over them."""
        directory = Path(directory)
        encoder_dir, tfidf_dir = (directory / member for member in BLEND_MEMBERS)
        self.encoder.save(encoder_dir, version=f"{version}-encoder", data_fingerprint=data_fingerprint)
        self.tfidf.save(tfidf_dir, version=f"{version}-tfidf", data_fingerprint=data_fingerprint)
        write_card(directory, version=version, labels=self.labels, kind="blend",
                   base_model=self.encoder.base_model, max_length=self.config.max_length,
                   thresholds=thresholds, metrics=metrics, data_fingerprint=data_fingerprint, train_config=self.config.to_dict(),
                   tfidf_share=self.tfidf_share,
                   training={"seconds": round(self.seconds, 2), "steps": self.steps,
                             "final_loss": self.encoder.losses[-1] if self.encoder.losses else None})
        return directory

    def classifier(self, version: str = "unregistered") -> BlendedClassifier:
        """This blend as the classifier the bot serves, without saving it first."""
        return BlendedClassifier(self.encoder.classifier(version), self.tfidf.classifier(version),
                                 self.tfidf_share, version=version)


def train_model(config: TrainConfig, examples: Sequence[Example], labels: Sequence[str] | None = None, *,
                progress: bool = True) -> TrainedModel | TrainedBlend:
    """Fine-tune as `config` says; with `config.tfidf_share` > 0, also fit TF-IDF and blend the two."""
    encoder = fine_tune(config, examples, labels, progress=progress)
    if config.tfidf_share == 0:
        return encoder
    return TrainedBlend(encoder, train_tfidf(examples, seed=config.seed), config.tfidf_share)


def choose_tfidf_share(truth: Sequence[str], encoder_scores: Sequence[dict[str, float]],
                       tfidf_scores: Sequence[dict[str, float]], repos: Sequence[str | None],
                       grid: Sequence[float] = SHARE_GRID) -> tuple[float, float]:
    """The TF-IDF share with the best mean-repo macro-F1 on validation issues, and that score.

    Ties go to the share closest to 0.5.
    """
    best: tuple[float, float] | None = None
    for share in sorted(grid, key=lambda s: abs(s - 0.5)):
        predicted = [top_label(row) for row in blend_scores(encoder_scores, tfidf_scores, share)]
        score = mean_repo_macro_f1(truth, predicted, repos)
        if best is None or score > best[1]:
            best = (share, score)
    if best is None:
        raise ValueError("the grid is empty: pass at least one TF-IDF share")
    return best
