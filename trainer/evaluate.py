"""How good a classifier is: macro-F1 (the lesson's), per label, per repository (NLBSE), confusion and
thresholds.

Everything but `evaluate_classifier` is pure: lists of labels and score dicts in, plain data out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.thresholds import UNREACHABLE, lowest_threshold
from trainer.dataset import Example, data_fingerprint

NO_REPO = "(none)"  # per_repo key of examples that carry no repository
COVERAGE_GRID = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)  # top-score thresholds of the trade-off table

Scores = Sequence[dict[str, float]]


def per_label(truth: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> dict[str, dict]:
    """{label: {precision, recall, f1, support}} (scikit-learn's; F1 is 0 when a label has no hit)."""
    from sklearn.metrics import precision_recall_fscore_support

    if not labels:
        return {}
    precision, recall, f1, support = precision_recall_fscore_support(
        list(truth), list(predicted), labels=list(labels), zero_division=0)
    return {label: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(n)}
            for label, p, r, f, n in zip(labels, precision, recall, f1, support, strict=True)}


def macro_f1(truth: Sequence[str], predicted: Sequence[str], labels: Sequence[str] | None = None) -> float:
    """F1 of each label, averaged: every label counts the same (default labels: all seen in either list)."""
    labels = labels if labels is not None else sorted(set(truth) | set(predicted))
    if not labels:
        return 0.0
    return sum(row["f1"] for row in per_label(truth, predicted, labels).values()) / len(labels)


def confusion_matrix(truth: Sequence[str], predicted: Sequence[str],
                     labels: Sequence[str]) -> list[list[int]]:
    """Counts; rows: the actual label, columns: what the model said, both in `labels` order."""
    from sklearn.metrics import confusion_matrix as counts

    return counts(list(truth), list(predicted), labels=list(labels)).tolist()


def plot_confusion(matrix: Sequence[Sequence[int]], labels: Sequence[str], path: Path | str) -> Path:
    """A PNG heat map, coloured by share of each actual label, annotated with counts."""
    from core.plots import confusion_figure

    confusion_figure(matrix, labels).savefig(path, dpi=120)
    return Path(path)


def per_repo(truth: Sequence[str], predicted: Sequence[str], repos: Sequence[str | None]) -> dict[str, dict]:
    """NLBSE style: each repository's macro-F1 over only the labels present in its own truth."""
    groups: dict[str, list[int]] = {}
    for i, repo in enumerate(repos):
        groups.setdefault(repo or NO_REPO, []).append(i)
    result = {}
    for repo, rows in sorted(groups.items()):
        repo_truth, repo_predicted = [truth[i] for i in rows], [predicted[i] for i in rows]
        present = sorted(set(repo_truth))
        result[repo] = {"macro_f1": macro_f1(repo_truth, repo_predicted, present), "n": len(rows),
                        "labels": present}
    return result


def mean_repo_macro_f1(truth: Sequence[str], predicted: Sequence[str], repos: Sequence[str | None]) -> float:
    """The mean over repositories of `per_repo` macro-F1 (the NLBSE'24 cross-repo score)."""
    scores = [row["macro_f1"] for row in per_repo(truth, predicted, repos).values()]
    return sum(scores) / len(scores) if scores else 0.0


def top_label(scores: dict[str, float]) -> str:
    """The label with the highest score."""
    return max(scores, key=scores.__getitem__)


def precision_coverage(scores: Scores, truth: Sequence[str],
                       grid: Sequence[float] = COVERAGE_GRID) -> list[dict[str, float | None]]:
    """For each threshold on the top score: the share of issues labelled and the precision on those."""
    tops = [(max(row.values()), top_label(row) == t) for row, t in zip(scores, truth, strict=True)]
    table = []
    for threshold in grid:
        kept = [correct for score, correct in tops if score >= threshold]
        table.append({"threshold": threshold, "coverage": len(kept) / max(1, len(tops)),
                      "precision": sum(kept) / len(kept) if kept else None})
    return table


def thresholds_for_precision(scores: Scores, truth: Sequence[str], target: float) -> dict[str, float]:
    """Per label, the lowest top-score threshold at which that label's predictions reach `target` precision
    (core.thresholds.lowest_threshold, the rule a repository's own thresholds follow too).

    The lowest such threshold labels the most issues. A label never predicted here is left out (the
    serving default applies); one whose precision never reaches the target gets UNREACHABLE.
    """
    by_label: dict[str, list[tuple[float, bool]]] = {}
    for row, t in zip(scores, truth, strict=True):
        label = top_label(row)
        by_label.setdefault(str(label), []).append((row[label], label == t))
    found = {label: lowest_threshold([score for score, _ in pairs], [correct for _, correct in pairs], target)
             for label, pairs in sorted(by_label.items())}
    return {label: UNREACHABLE if threshold is None else threshold for label, threshold in found.items()}


def score_predictions(truth: Sequence[str], scores: Scores, repos: Sequence[str | None],
                      labels: Sequence[str], target_precision: float) -> dict[str, Any]:
    """Every metric of one evaluation, JSON-ready.

    macro_f1 averages the labels that occur in the truth or the predictions: a class the model knows but
    the data lacks and the model never predicts says nothing about quality (with all classes present this
    is exactly the lesson's score). per_label and confusion list every one of `labels`.
    """
    predicted = [top_label(row) for row in scores]
    return {
        "macro_f1": macro_f1(truth, predicted),
        "mean_repo_macro_f1": mean_repo_macro_f1(truth, predicted, repos),
        "accuracy": sum(t == p for t, p in zip(truth, predicted, strict=True)) / max(1, len(truth)),
        "per_repo": per_repo(truth, predicted, repos),
        "per_label": per_label(truth, predicted, labels),
        "labels": list(labels),
        "confusion": confusion_matrix(truth, predicted, labels),
        "thresholds": thresholds_for_precision(scores, truth, target_precision),
        "target_precision": target_precision,
        "precision_coverage": precision_coverage(scores, truth),
    }


def evaluate_classifier(classifier, examples: Sequence[Example], *, batch_size: int = 32,
                        labels: Sequence[str] | None = None, target_precision: float = 0.9,
                        scored: tuple[Sequence[dict[str, float]], float] | None = None) -> dict[str, Any]:
    """Score a classifier on labelled examples; rows whose label it cannot predict are counted and left out.

    `labels`: the classes scored (default: the classifier's own; the classifier's are always included).
    `scored`: the classifier's scores of every example and the seconds they took, where the caller has them.
    """
    labels = list(labels or []) + [label for label in classifier.labels if label not in (labels or [])]
    known = [example for example in examples if example.label in labels]
    if not known:
        raise ValueError(f"none of the {len(examples)} examples has a label the model knows ({labels})")
    if scored is None:
        started = time.perf_counter()
        scores = predict_all(classifier, [example.text for example in known], batch_size)
        seconds = time.perf_counter() - started
    else:
        scores = [row for row, example in zip(scored[0], examples, strict=True) if example.label in labels]
        seconds = scored[1]
    result = score_predictions([example.label for example in known], scores,
                               [example.repo for example in known], labels, target_precision)
    skipped = sorted({example.label for example in examples if example.label not in labels})
    return result | {"n_scored": len(known), "n_skipped": len(examples) - len(known),
                     "skipped_labels": skipped, "issues_per_second": len(known) / max(seconds, 1e-9),
                     "model_version": classifier.version, "eval_fingerprint": data_fingerprint(known)}


def predict_all(classifier, texts: Sequence[str], batch_size: int) -> list[dict[str, float]]:
    """Scores of every text, batched by length (pad-free batches) and returned in the input order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    scores: list[dict[str, float]] = [{} for _ in texts]
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        for i, row in zip(chunk, classifier.predict([texts[i] for i in chunk]), strict=True):
            scores[i] = row
    return scores
