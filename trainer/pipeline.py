"""Train and register: how a model enters the registry, whoever asks (retraining, `issue-sorter train` and
`bootstrap-model`, `select`).

Train as the recipe says → score it on held-out issues (its card's metrics and per-label thresholds) →
store it (trainer.registry) → build and gate its fast serving path (trainer.fast_path). A published model
pulled back in skips the training and joins at the storing (`add_to_registry`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from core.tables import GLOBAL_SCOPE
from trainer.blend import Trained, train_model
from trainer.config import TrainConfig
from trainer.dataset import Example, data_fingerprint
from trainer.evaluate import evaluate_classifier
from trainer.fast_path import Answers, FastPathOptions, answers_from, build_fast_path
from trainer.precision import PrecisionChoice, Verdicts
from trainer.registry import Model, Registry, Saveable


class Registered(NamedTuple):
    """What `train_and_register` made: the registered model, the model in memory, and what it scored."""

    model: Model
    trained: Trained
    metrics: dict[str, Any]


def train_and_register(registry: Registry, config: TrainConfig, examples: Sequence[Example], *,
                       labels: Sequence[str] | None = None, scope: str = GLOBAL_SCOPE,
                       held_out: Sequence[Example] = (), evaluate: bool = False, metrics: dict | None = None,
                       tfidf_also: Sequence[Example] = (), fast_path: FastPathOptions = FastPathOptions(),
                       progress: bool = False, precision: PrecisionChoice | None = None) -> Registered:
    """Train on `examples` as `config` says (trainer.blend.train_model), register it, build its fast path.

    `held_out`: issues it never trained on; with `evaluate`, it is scored on them and its card keeps the
    metrics and the per-label thresholds they give (a blend's measured on the blend's own scores). Otherwise
    `metrics` (with their `thresholds`), when the caller measured them another way (`select`'s folds).
    Either way the held-out issues gate the fast path where NLBSE'24's test split is not there.
    `precision`: None reads (and keeps) this CPU's precision verdict under the registry's model directory.
    """
    precision = precision or PrecisionChoice(Verdicts.under(registry.model_dir))
    trained = train_model(config, examples, labels, progress=progress, tfidf_also=tfidf_also, precision=precision)
    reference = None
    if evaluate and held_out:
        metrics, reference = score_held_out(trained.classifier(), held_out, fast_path)
    model = add_to_registry(registry, trained, scope=scope, metrics=metrics,
                            data_fingerprint=data_fingerprint([*examples, *tfidf_also]), held_out=held_out,
                            fast_path=fast_path, calibration=examples, reference=reference)
    return Registered(model, trained, metrics or {})


def score_held_out(classifier, held_out: Sequence[Example], fast_path: FastPathOptions
                   ) -> tuple[dict[str, Any], Answers | None]:
    """The card's metrics on `held_out`; where those are the fast path's gate issues too (the bootstrap's
    NLBSE'24 test split), also the gate's reference answers, from the same pass: it runs once, not twice."""
    gated_alike = fast_path.build and tuple(fast_path.issues(held_out)[0]) == tuple(held_out)
    if not (gated_alike and classifier.card.has_encoder):
        return evaluate_classifier(classifier, held_out), None
    started = time.perf_counter()
    scores, vectors = classifier.predict_and_embed([example.text for example in held_out])
    metrics = evaluate_classifier(classifier, held_out, scored=(scores, time.perf_counter() - started))
    return metrics, answers_from(scores, vectors, held_out)


def add_to_registry(registry: Registry, source: Saveable | Path | str, *, scope: str = GLOBAL_SCOPE,
                    metrics: dict | None = None, data_fingerprint: str | None = None,
                    held_out: Sequence[Example] = (),
                    fast_path: FastPathOptions = FastPathOptions(), calibration: Sequence[Example] = (),
                    reference: Answers | None = None) -> Model:
    """Store a trained model (or a saved directory) as a new version, then build and gate the fast path of
    its encoder, if it has one; PyTorch serves it when `fast_path.build` is off or the gate says no.
    `calibration`: the issues it was trained on, which static int8 calibrates on where `fast_path.static_int8`
    asks for it. `reference`: fp32 PyTorch's answers on the gate's issues, where they were scored already."""
    model = registry.register(source, scope=scope, metrics=metrics, thresholds=(metrics or {}).get("thresholds"),
                              data_fingerprint=data_fingerprint)
    if not (fast_path.build and model.card.has_encoder):
        return model
    issues, issues_source = fast_path.issues(held_out)
    texts = [example.text for example in calibration] if fast_path.static_int8 else []
    return Model(model.row, build_fast_path(model, issues, source=issues_source, cpu_flags=fast_path.cpu_flags,
                                            calibration=texts, reference=reference,
                                            all_engines=fast_path.gates_all_now()))
