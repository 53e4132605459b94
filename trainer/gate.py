"""The promotion gate: a new model serves only if it beats the serving one on the same held-out issues."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence

from core.classifier import Classifier
from core.kinds import labels_for_kinds
from core.tables import GLOBAL_SCOPE, TrainingRun
from trainer.dataset import Example, data_fingerprint
from trainer.evaluate import evaluate_classifier
from trainer.registry import Model, Registry

log = logging.getLogger(__name__)

PROMOTED, NOT_PROMOTED = "promoted", "not promoted"  # how a verdict begins (`verdict`)


def compare_and_promote(registry: Registry, challenger: Model, eval_examples: Sequence[Example], *,
                        scope: str = GLOBAL_SCOPE, force: bool = False, trigger: str = "manual",
                        classifier_of: Callable[[Model], Classifier] = Model.classifier) -> TrainingRun:
    """Score challenger and champion by macro-F1 on `eval_examples`; promote the challenger only if it is
    strictly better, or there is no champion, or `force`. The TrainingRun row records scores and decision.

    `classifier_of`: how a model is loaded to be scored (as it serves, by default; a test's stand-in).
    `challenger`: as registered for `scope`, or as `Registry.model(version, scope=scope)` finds it (another
    scope's model is refused there, before it is scored).
    """
    # a repository without a model of its own is served by the global model through the kind mapping
    champion = registry.champion(scope)
    run = TrainingRun(scope=scope, trigger=trigger, n_examples=len(eval_examples),
                      challenger_version_id=challenger.row.id,
                      champion_version_id=champion.row.id if champion else None)
    if champion is not None and champion.row.id == challenger.row.id:
        run.promoted, run.message = False, f"{challenger.version} already serves {scope}"
    else:
        renames = kind_renames(champion.row.labels, challenger.row.labels) if champion else {}
        labels = sorted(set(challenger.row.labels) | {renames.get(label, label) for label in
                                                      (champion.row.labels if champion else [])})
        scored = [example for example in eval_examples if example.label in labels]  # the SAME rows for both
        run.challenger_score = _score(challenger, scored, labels, classifier_of)
        run.champion_score = _score(champion, scored, labels, classifier_of, renames) if champion else None
        run.promoted, why = decide(run.challenger_score, run.champion_score, has_champion=champion is not None,
                                   force=force)
        run.message = f"{challenger.version}: {why} ({len(scored)} held-out issues)"
        if run.promoted:
            registry.promote(challenger.version, why, scope=scope)
    run.status, run.finished_at = "finished", dt.datetime.now(dt.timezone.utc)
    registry.session.add(run)
    registry.session.flush()
    log.info("training run %s: %s", run.id, run.message)
    return run


def verdict(run: TrainingRun) -> str:
    """The gate's decision in the words every command, job and reply uses: "promoted VERSION: why" or
    "not promoted VERSION: why" (the review page reads the first word)."""
    return f"{PROMOTED if run.promoted else NOT_PROMOTED} {run.message}"


def decide(challenger: float | None, champion: float | None, *, has_champion: bool,
           force: bool) -> tuple[bool, str]:
    """(promote?, why): the decision alone, on plain numbers."""
    if force:
        return True, "forced"
    if not has_champion:
        return True, "no model served this scope"
    if challenger is None or champion is None:
        return False, ("kept out: no held-out human-confirmed issues to compare on "
                       "(use --force to promote anyway)")
    if challenger > champion:
        return True, f"macro-F1 {challenger:.4f} > {champion:.4f} of the serving model"
    return False, f"kept out: macro-F1 {challenger:.4f} <= {champion:.4f} of the serving model"


def kind_renames(champion_labels: Sequence[str], challenger_labels: Sequence[str]) -> dict[str, str]:
    """kind → repository label, when the champion predicts kinds and the challenger the repo's labels."""
    if set(champion_labels) & set(challenger_labels):
        return {}
    return {kind: label for kind, label in labels_for_kinds(challenger_labels).items() if kind in champion_labels}


class RenamedClassifier:
    """A classifier whose classes are renamed (the global kind model as it serves one repository)."""

    def __init__(self, inner, renames: dict[str, str]):
        self.inner, self.renames, self.version = inner, renames, inner.version
        self.labels = [renames.get(label, label) for label in inner.labels]

    def predict(self, texts: Sequence[str]) -> list[dict[str, float]]:
        return [{self.renames.get(k, k): v for k, v in row.items()} for row in self.inner.predict(texts)]


def _score(model: Model, examples: Sequence[Example], labels: list[str],
           classifier_of: Callable[[Model], Classifier], renames: dict[str, str] | None = None) -> float | None:
    if not examples:
        return None
    metrics = model.row.metrics
    if not renames and metrics.get("eval_fingerprint") == data_fingerprint(examples):
        return metrics["macro_f1"]  # scored on exactly these issues when it was trained: reuse
    classifier = classifier_of(model)
    if renames:
        classifier = RenamedClassifier(classifier, renames)
    return evaluate_classifier(classifier, examples, labels=labels)["macro_f1"]
