"""An encoder blended with the TF-IDF model trained on the same issues: the recipe's last step.

The fine-tuned encoder and TF-IDF + logistic regression make different mistakes; averaging their
probabilities beat either alone on validation and on the NLBSE'24 test split (docs/BENCHMARKS.md).
A blend is saved as one registry version with each member in its own subdirectory, and served by
`core.classifier.BlendedClassifier`. `train_model` trains every kind: an encoder, a blend, or the TF-IDF
baseline alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.card import BLEND_MEMBERS, ModelCard, write_card
from core.classifier import BlendedClassifier
from trainer.baseline import BASE_MODEL as TFIDF_BASE_MODEL
from trainer.baseline import TrainedBaseline, train_tfidf_borrowing
from trainer.config import OTHER_REPOS_TFIDF_WEIGHT, TrainConfig
from trainer.dataset import Example
from trainer.precision import PrecisionChoice, fine_tune_for_cpu
from trainer.train import TrainedModel


@dataclass
class TrainedBlend:
    """A fine-tuned encoder and a TF-IDF model, trained on the same issues, and the TF-IDF share.

    A repository's TF-IDF model may also have learnt from other repositories' issues (`train_model`).
    """

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
                   thresholds=thresholds, metrics=metrics, data_fingerprint=data_fingerprint,
                   train_config=self.config.to_dict(), tfidf_share=self.tfidf_share,
                   training=self.encoder.training_record() | {"seconds": round(self.seconds, 2)})  # both members' time
        return directory

    def classifier(self, version: str = "unregistered") -> BlendedClassifier:
        """This blend as the classifier the bot serves, without saving it first."""
        card = ModelCard(version=version, labels=self.labels, max_length=self.config.max_length, kind="blend",
                         base_model=self.encoder.base_model,
                         extra={"tfidf_share": self.tfidf_share, "train_config": self.config.to_dict()})
        return BlendedClassifier(self.encoder.classifier(version), self.tfidf.classifier(version),
                                 self.tfidf_share, card=card)


Trained = TrainedModel | TrainedBlend | TrainedBaseline  # what train_model returns; each saves and scores


def train_model(config: TrainConfig, examples: Sequence[Example], labels: Sequence[str] | None = None, *,
                progress: bool = True, tfidf_also: Sequence[Example] = (),
                precision: PrecisionChoice = PrecisionChoice()) -> Trained:
    """Fine-tune as `config` says; with `config.tfidf_share` > 0, also fit TF-IDF and blend the two. A
    `config.base_model` of "tfidf-logreg" fits the TF-IDF baseline alone (`select`'s bar), with its seed.

    The encoder trains once, in the precision `precision`'s verdict for the CPU says (auto: bf16 autocast where
    a short run on that kind of CPU showed it trains as well as fp32; trainer.precision.fine_tune_for_cpu).
    `tfidf_also`: more issues (other repositories') that only the TF-IDF model learns from, each weighted
    OTHER_REPOS_TFIDF_WEIGHT against one of `examples`; those of a class the encoder lacks are left out.
    """
    encoder = None
    if config.base_model == TFIDF_BASE_MODEL:
        if config.tfidf_share:
            raise ValueError(f"base model {TFIDF_BASE_MODEL} is TF-IDF alone: it blends with no encoder, so "
                             f"give it tfidf_share 0 (got {config.tfidf_share:g})")
        labels = list(labels) if labels is not None else sorted({example.label for example in examples})
    else:
        encoder = fine_tune_for_cpu(config, examples, labels, choice=precision, progress=progress)
        if config.tfidf_share == 0:
            return encoder
        labels = encoder.labels
    tfidf = train_tfidf_borrowing(examples, tfidf_also, weight=OTHER_REPOS_TFIDF_WEIGHT, labels=labels,
                                  seed=config.seed)
    return tfidf if encoder is None else TrainedBlend(encoder, tfidf, config.tfidf_share)
