"""The own labels' rule: a logistic-regression head per label on the issue's embedding and its words
(core.own_labels.words), applied from a threshold that keeps the target precision on the memory's own rows.

Fitted on the memory by the feedback queue (`fit_rules`, stored by core.own_labels.storage) and applied per
issue by the labelling job (`OwnLabelRules.score`). A label's threshold is chosen on scores of rows that
the head scoring them never saw (cross-fitted): a head fitted on every row scores its own rows too well and
would set a threshold it cannot keep on new issues. A label the maintainers stopped using gets none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.memory import normalised
from core.own_labels.vote import OwnLabelMemory
from core.own_labels.words import WordFeatures
from core.thresholds import lowest_threshold

DEFAULT_MIN_EXAMPLES = 20  # a config's min_examples: confirmed examples before a label is applied
SUGGEST_SCORE = 0.5  # a label not applied is suggested from this score on (half its neighbours' weight)


@dataclass(frozen=True)
class OwnLabelParams:
    """The rule's knobs, what serves as the defaults (docs/BENCHMARKS.md, "A repository's own labels from
    its memory"); a repository's config sets the target precision and min_examples, passed apart. Stored fits
    are keyed by them (`key`): fits stored under other knobs are fitted anew, never served."""

    neighbours: int = 10  # confirmed issues whose vote scores a label no head serves
    head_c: float = 1.0  # inverse L2 strength of a label's logistic regression (sklearn's default)
    head_folds: int = 5  # folds of the cross-fit that scores each memory row by a head fitted without it
    # a threshold's own neighbourhood of scores must be right this often too (core.thresholds): the precision
    # above a threshold can reach the target through a band of mostly wrong rows carried by many sure ones,
    # and that band is what a shift in the issues' mix spoils
    local_precision: float = 0.5
    # a label none of the memory's newest rows carries, where its share of all rows expected this many among
    # them, is no longer applied: the maintainers stopped using it (None: never)
    stopped_expected: float | None = 5.0

    def key(self) -> dict:
        """The knobs as stored JSON reads them back."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class LabelHead:
    """One label's logistic regression: P(label | features) = sigmoid(features · weights + bias)."""

    weights: np.ndarray
    bias: float

    def score(self, features) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(np.asarray(features @ self.weights).ravel() + self.bias)))


def fit_head(features, carried: np.ndarray, c: float = OwnLabelParams.head_c) -> LabelHead:
    """The label's head fitted on every row (`carried`: the rows that carry it) at inverse L2 strength `c`."""
    from sklearn.linear_model import LogisticRegression

    # balanced: a label on 2 % of the issues weighs as much as the rest; thresholds set the precision
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=1000).fit(
        features, np.asarray(carried, dtype=bool))
    return LabelHead(model.coef_[0].astype(np.float64), float(model.intercept_[0]))


def cross_fitted(features, carried: np.ndarray, params: OwnLabelParams = OwnLabelParams(), seed: int = 0
                 ) -> np.ndarray:
    """Each row's head probability from a head fitted on the other folds: what the threshold is chosen on."""
    from sklearn.model_selection import StratifiedKFold

    carried = np.asarray(carried, dtype=bool)
    folds = min(params.head_folds, int(carried.sum()), int((~carried).sum()))
    scores = np.zeros(len(carried))
    if folds < 2:
        return scores
    for train, held in StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(carried)),
                                                                                    carried):
        scores[held] = fit_head(features[train], carried[train], params.head_c).score(features[held])
    return scores


def threshold_at(scores: np.ndarray, carried: np.ndarray, target: float, local_precision: float) -> float:
    """The lowest threshold at which rows scored `scores` (each without itself), labelled where carried, are
    right at `target` precision with the local floor (core.thresholds.lowest_threshold); inf where none is
    (a score of 0 never applies a label)."""
    found = lowest_threshold(scores, carried, target, local_precision=local_precision)
    return np.inf if found is None else max(found, 1e-9)


def stopped_using(carried: np.ndarray, expected: float | None) -> bool:
    """Whether the rows (oldest first) that carry a label end long enough before the newest row that its
    share of all rows would have put `expected` among the newest."""
    carried = np.asarray(carried, dtype=bool)
    if not expected or not carried.any():
        return False
    newest = int(np.ceil(expected * carried.size / carried.sum()))
    return newest <= carried.size and not carried[-newest:].any()


@dataclass(frozen=True)
class OwnScore:
    """One own label's decision input: its score, the threshold it needs (None: not served) and examples."""

    label: str
    score: float
    threshold: float | None  # None: fewer than min_examples confirmed, or no threshold keeps the target
    examples: int


@dataclass(frozen=True)
class OwnLabelRules:
    """Each own label's threshold at the target precision and, where it is served, its head: fitted on the
    repository's memory (`fit_rules`), stored as data (core.own_labels.storage), applied per issue (`score`)."""

    examples: dict[str, int]  # label → confirmed examples when fitted
    thresholds: dict[str, float]  # served labels only; inf: no threshold kept the target
    heads: dict[str, LabelHead] = field(default_factory=dict)
    words: WordFeatures | None = None  # the heads' TF-IDF vocabulary; None where the texts shared no word
    params: OwnLabelParams = OwnLabelParams()  # what they were fitted with; the vote's neighbours

    def score(self, vector: Sequence[float], names: Sequence[str], memory: OwnLabelMemory | None = None,
              *, text: str | None = None, examples: Mapping[str, int] | None = None) -> list[OwnScore]:
        """Each of `names`' score for the issue embedded as `vector` (its text `text`, which the heads read)
        and the threshold it needs: a served label's by its head, any other's (a suggestion at most) by the
        memory's vote. `examples`: the counts to show (the memory's, newer than the fit's)."""
        examples = {**self.examples, **(examples or {})}
        votes = (memory.votes(vector, names, self.params.neighbours) if memory is not None
                 else np.zeros(len(names)))
        if self.heads and text is None:
            raise ValueError("these own-label rules read the issue's words: score(..., text=) is needed")
        features = normalised(vector).astype(np.float64)[None, :]
        if self.words is not None and self.heads:
            features = self.words.features(features, [text])
        result = []
        for name, voted in zip(names, votes, strict=True):
            threshold = self.thresholds.get(name)
            score = float(voted)
            if threshold is not None and name in self.heads:
                score = float(self.heads[name].score(features)[0])
            served = threshold is not None and np.isfinite(threshold)
            result.append(OwnScore(name, round(score, 4), float(threshold) if served else None,
                                   examples.get(name, 0)))
        return result


def fit_rules(memory: OwnLabelMemory, *, min_examples: int, target: float,
              params: OwnLabelParams = OwnLabelParams()) -> OwnLabelRules:
    """The rules for every label with `min_examples` confirmed examples that some but not all of the memory's
    rows carry: each threshold chosen on the memory's own rows, each scored by a head cross-fitted without it
    (`params.head_folds` folds), the head then fitted on every row; a label the maintainers stopped using
    (`stopped_using`) keeps no threshold (suggested on the review page, no longer applied)."""
    names = sorted(name for name, n in memory.examples.items() if n >= min_examples)
    carries = memory.carries(names)
    served = [i for i, name in enumerate(names) if carries[:, i].any() and not carries[:, i].all()]
    thresholds, heads = {name: np.inf for name in names}, {}
    if len(memory) < 2 or not served:
        return OwnLabelRules(dict(memory.examples), thresholds, params=params)
    if memory.texts is None:
        raise ValueError("the own labels' heads read the memory's texts: fit on storage.with_texts(session, memory)")
    features, words = memory.vectors.astype(np.float64), WordFeatures.fit(memory.texts)
    if words is not None:
        features = words.features(features, memory.texts)
    from threadpoolctl import threadpool_limits

    # one BLAS thread: the heads' matrices are small, and two threads fitted them several times slower on a
    # shared 2-core machine (docs/BENCHMARKS.md, "A repository's own labels from its memory")
    with threadpool_limits(1):
        for i in served:
            carried = carries[:, i] > 0
            if stopped_using(carried, params.stopped_expected):
                continue  # its threshold stays inf
            thresholds[names[i]] = threshold_at(cross_fitted(features, carried, params), carried, target,
                                                params.local_precision)
            heads[names[i]] = fit_head(features, carried, params.head_c)
    return OwnLabelRules(dict(memory.examples), thresholds, heads, words, params)
