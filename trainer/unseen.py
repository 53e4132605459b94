"""The unseen-repository protocol: every repository's issues scored by a model trained without any of them.

Repositories (groups: Ticket Tagger is one) are dealt into K folds of whole repositories; each fold's
model is trained on the mix of the other folds only, and scores the fold's issues. The score is the mean
over repositories of each one's macro-F1 over the kinds it has (NLBSE style, `trainer.evaluate.per_repo`),
with each kind's F1 over all issues beside it. A choice fitted on these scores (the blend share) is
nested: each fold's share is the best on the other folds' issues.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.classifier import blend_scores
from core.kinds import KINDS
from trainer.dataset import Example
from trainer.evaluate import per_label, per_repo, predict_all, top_label
from trainer.sources import MixConfig, all_issues, capped, training_mix

SHARES = tuple(round(0.1 * step, 1) for step in range(11))  # TF-IDF shares tried (0: the encoder alone)
EVAL_PER_GROUP_KIND = 150  # issues of each (repository, kind) scored: big repositories count once, not 10×

Trainer = Callable[[list[Example]], Any]  # training issues → a classifier with .predict(texts)


@dataclass
class Folds:
    """Repositories dealt into folds, and the issues each fold scores."""

    groups: list[list[str]]  # repositories of each fold
    pool: list[Example]  # the issues scored, each by the model of its repository's fold

    def fold_of(self, repo: str | None) -> int:
        """Index of the fold holding `repo`."""
        return next(i for i, group in enumerate(self.groups) if repo in group)


@dataclass
class OutOfFold:
    """Each member's scores of every pool issue by its fold's model, and what training cost."""

    folds: Folds
    scores: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # member → training seconds over all folds
    rates: dict[str, float] = field(default_factory=dict)  # member → issues scored per second
    trained_on: list[int] = field(default_factory=list)  # training issues of each fold
    embeddings: dict[str, list[list[float]]] = field(default_factory=dict)  # member → each pool issue's, by
    # its fold's encoder (the memory's vectors), for the members `run_folds` was asked to embed with


def deal_folds(examples: Sequence[Example], k: int) -> list[list[str]]:
    """Whole repositories into `k` folds of similar issue counts: largest first, to the smallest fold."""
    sizes = Counter(example.repo for example in examples)
    k = min(k, len(sizes))
    if k < 2:
        raise ValueError(f"the protocol needs at least two repositories, got {sorted(sizes, key=str)}")
    folds: list[list[str]] = [[] for _ in range(k)]
    totals = [0] * k
    for repo, size in sorted(sizes.items(), key=lambda item: (-item[1], str(item[0]))):
        smallest = totals.index(min(totals))
        folds[smallest].append(repo)
        totals[smallest] += size
    return [sorted(fold, key=str) for fold in folds]


def make_folds(sources: Mapping[str, Sequence[Example]], k: int, *, per_group_kind: int = EVAL_PER_GROUP_KIND,
               seed: int = 42) -> Folds:
    """Folds over every repository of `sources`, and the (capped) issues each is scored on."""
    pool = capped(all_issues(sources), per_group_kind, seed)
    return Folds(deal_folds(pool, k), pool)


def fold_data(sources: Mapping[str, Sequence[Example]], folds: Folds, index: int,
              mix: MixConfig) -> tuple[list[Example], list[Example]]:
    """(training mix without the fold's repositories, the fold's issues to score)."""
    held_out = set(folds.groups[index])
    return training_mix(sources, mix, exclude=held_out), [example for example in folds.pool if example.repo in held_out]


def run_folds(sources: Mapping[str, Sequence[Example]], folds: Folds, members: Mapping[str, Trainer],
              mix: MixConfig, *, log: Callable[[str], None] = print, embed: Collection[str] = ()) -> OutOfFold:
    """Train every member once per fold and score the fold's issues with it; members named in `embed`
    also embed them (their classifier's `embed`, what the memory stores)."""
    result = OutOfFold(folds)
    rows: dict[str, dict[int, dict]] = {name: {} for name in members}
    vectors: dict[str, dict[int, list[float]]] = {name: {} for name in embed}
    scoring: dict[str, float] = dict.fromkeys(members, 0.0)
    for index in range(len(folds.groups)):
        train, test = fold_data(sources, folds, index, mix)
        result.trained_on.append(len(train))
        positions = [i for i, example in enumerate(folds.pool) if example.repo in set(folds.groups[index])]
        for name, trainer in members.items():
            started = time.perf_counter()
            classifier = trainer(train)
            result.seconds[name] = result.seconds.get(name, 0.0) + time.perf_counter() - started
            started = time.perf_counter()
            scores = predict_all(classifier, [example.text for example in test], 32)
            scoring[name] += time.perf_counter() - started
            rows[name].update(zip(positions, scores, strict=True))
            if name in vectors:
                vectors[name].update(zip(positions, classifier.embed([e.text for e in test]), strict=True))
            log(f"fold {index + 1}/{len(folds.groups)} {name}: trained on {len(train)}, scored {len(test)}")
    for name in members:
        result.scores[name] = [rows[name][i] for i in range(len(folds.pool))]
        result.rates[name] = len(folds.pool) / max(scoring[name], 1e-9)
    for name, by_position in vectors.items():
        result.embeddings[name] = [by_position[i] for i in range(len(folds.pool))]
    return result


def score(examples: Sequence[Example], scores: Sequence[dict[str, float]]) -> dict[str, Any]:
    """Mean per-repository macro-F1 (kinds each repository has), per repository, and each kind's F1."""
    truth, predicted = [e.label for e in examples], [top_label(row) for row in scores]
    parts = per_repo(truth, predicted, [e.repo for e in examples])
    kinds = [kind for kind in KINDS if kind in set(truth)]
    return {"mean": sum(p["macro_f1"] for p in parts.values()) / len(parts),
            "per_repo": {repo: p["macro_f1"] for repo, p in parts.items()},
            "per_kind": per_label(truth, predicted, kinds)}


def blend(oof: OutOfFold, encoder: str, tfidf: str, share: float) -> list[dict[str, float]]:
    """The two members' out-of-fold scores blended, TF-IDF weighing `share` (as BlendedClassifier)."""
    return blend_scores(oof.scores[encoder], oof.scores[tfidf], share)


def nested_blend(oof: OutOfFold, encoder: str, tfidf: str,
                 shares: Sequence[float] = SHARES) -> tuple[list[dict[str, float]], list[float]]:
    """Blended scores where each fold's share is the one scoring best on the other folds' issues."""
    pool, folds = oof.folds.pool, oof.folds
    by_share = {share: blend(oof, encoder, tfidf, share) for share in shares}
    fold_of = [folds.fold_of(example.repo) for example in pool]
    chosen, nested = [], [{} for _ in pool]
    for index in range(len(folds.groups)):
        rest = [i for i, fold in enumerate(fold_of) if fold != index]
        best = max(shares, key=lambda s: score([pool[i] for i in rest], [by_share[s][i] for i in rest])["mean"])
        chosen.append(best)
        for i, fold in enumerate(fold_of):
            if fold == index:
                nested[i] = by_share[best][i]
    return nested, chosen


def best_share(oof: OutOfFold, encoder: str, tfidf: str, shares: Sequence[float] = SHARES) -> float:
    """The share scoring best over all folds: what the served recipe takes (its nested score is reported)."""
    return max(shares, key=lambda s: score(oof.folds.pool, blend(oof, encoder, tfidf, s))["mean"])
