"""Which of a repository's labels can be its *own* labels beside the kind (issue 29): areas, components,
topics (`module:linear_model`, `streaming`, `dataset-viewer`). A label is no candidate when it names a kind
(core.kinds) or a step of the process rather than what the issue is about (`good first issue`,
`needs triage`, `duplicate`, `wontfix`, ...): those say what to do with an issue, and a model that learnt
them would learn a maintainer's workload, not the text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from core.kinds import RULES
from core.memory import MemoryRows, read_rows
from core.own_label_names import name_columns
from core.own_label_words import WordFeatures
from core.tables import IssueRecord, OwnLabelExample

# Process labels, by the words GitHub's defaults and large projects use for them. Short words are matched
# as whole words: `low` must not take `area:tensorflow` or `workflow`, nor `high` `editor-highlight`.
PROCESS = re.compile(
    r"good[ _-]\w+[ _-]issue|first.timers?|help.wanted|beginner|\beasy\b|hacktoberfest|"
    r"triage|\bneeds?[ _:/-]|awaiting|waiting|blocked|in.progress|\bin.pr\b|\bwip\b|\bstale\b|stalled|"
    r"inactive|no.recent.activity|lifecycle|\bstatus\b|\breview|do.not.merge|\bcla\b|\bsize/|release.note|"
    r"\bsprint\b|\b(moderate|hard|difficulty)\b|"
    r"duplicate|wontfix|won.t.fix|\binvalid\b|not.planned|can.t.reproduce|cannot.reproduce|works.for.me|"
    r"\b(answered|resolved|fixed|closed|released)\b|backport|"
    r"priority|\bp[0-4]\b|severity|critical|\b(high|low|urgent)\b|"
    r"breaking|regression.confirmed|confirmed|accepted|approved|"
    r"dependencies|\bci\b|chore|spam",
    re.IGNORECASE)


# What a kind label may hold beside its kind's word: `Type: Bug`, `kind/feature`, `C-bug`, `Bug Report`.
KIND_FILLERS = re.compile(r"\b(type|kind|category|issue|is|c|t|request|report|reports|change)\b")


def is_candidate(label: str) -> bool:
    """Whether `label` may be one of the repository's own labels: no process label, and no kind label
    unless it says more than its kind (`dataset bug` is an area's bugs; `Type: Bug` only the kind)."""
    if PROCESS.search(label):
        return False
    return bool(re.search(r"[a-z0-9]", _without_kind_words(label.lower())))


def _without_kind_words(label: str) -> str:
    label = re.sub(r"[-/_:.]", " ", label)
    for _, pattern in RULES:
        label = re.sub(pattern, " ", label)
    return KIND_FILLERS.sub(" ", label)


def candidates(labels: Iterable[str]) -> list[str]:
    """The candidates among `labels`, in their order, each once."""
    return list(dict.fromkeys(label for label in labels if is_candidate(label)))


# ---- the vote: each own label scored by the repository's confirmed issues (bench.own_labels replays it) --

DEFAULT_MIN_EXAMPLES = 20  # confirmed examples before a label is applied; below, a review page suggestion
# (bench.own_labels on huggingface/datasets: from 5 or 10 examples labels with fewer than 20 were applied at
# 0.6-0.7 precision, micro 0.840; from 20, 0.861)
NEIGHBOURS = 10  # confirmed issues that vote (bench.own_labels: k = 10 gave the best precision at 0.85)
SUGGEST_SCORE = 0.5  # a label not applied is suggested from this vote on (half its neighbours' weight)


def vote(similarities: np.ndarray, carries: np.ndarray, k: int) -> np.ndarray:
    """(rows, labels) scores: for each row of `similarities` (rows × memory), the similarity-weighted share
    of its k nearest memory rows that carry each label (`carries`: memory × labels, 0/1)."""
    k = min(k, similarities.shape[1])
    nearest = np.argpartition(-similarities, k - 1, axis=1)[:, :k]
    weights = np.clip(np.take_along_axis(similarities, nearest, axis=1), 0, None)  # (rows, k)
    votes = np.einsum("rk,rkl->rl", weights, carries[nearest])
    return votes / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)


def loo_votes(vectors: np.ndarray, carries: np.ndarray, k: int) -> np.ndarray:
    """(rows, labels): each memory row's vote by the k nearest *other* rows (no row votes for itself)."""
    similarities = vectors @ vectors.T
    np.fill_diagonal(similarities, -np.inf)
    return vote(similarities, carries, k)


PSEUDO_COUNTS = 0.0  # a right and a wrong pseudo-label per threshold's count: (right + a) / (labelled + 2a)
PRECISION_Z = 0.0  # > 0: a threshold's precision is its Wilson lower bound at this z (bench.own_labels; off)
LOCAL_PRECISION = 0.5  # a threshold's own neighbourhood of scores (isotonic) must be right this often too:
# the precision above a threshold can reach 0.85 by a band of mostly wrong rows riding on many sure ones,
# and that band is what a shift in the issues' mix spoils (bench.own_labels: 0 lets it, 0.5 forbids it)


STOPPED_EXPECTED: float | None = 5.0  # a label none of the memory's newest rows carries, where its share of
# all rows expected this many among them, is no longer applied: the maintainers stopped using it (None: off)


def threshold_rule() -> str:
    """What a label's threshold depends on besides the memory and the target (core.own_label_fits keys its
    stored fits by it, so that an upgrade that changes the rule refits them rather than serve the old)."""
    return (f"pseudo {PSEUDO_COUNTS:g}, z {PRECISION_Z:g}, local {LOCAL_PRECISION:g}, "
            f"stopped {STOPPED_EXPECTED or 0:g}")


def stopped_using(carried: np.ndarray, expected: float | None = None) -> bool:
    """Whether the rows (oldest first) that carry a label end long enough before the newest row that its
    share of all rows would have put `expected` (STOPPED_EXPECTED where not given) among the newest."""
    expected = STOPPED_EXPECTED if expected is None else expected
    carried = np.asarray(carried, dtype=bool)
    if not expected or not carried.any():
        return False
    newest = int(np.ceil(expected * carried.size / carried.sum()))
    return newest <= carried.size and not carried[-newest:].any()


def threshold_at(scores: np.ndarray, carried: np.ndarray, target: float) -> float:
    """The lowest threshold at which rows scored `scores` (each without itself), labelled where carried,
    are right at `target` precision, counted with PSEUDO_COUNTS (a few rows above a threshold prove less
    than many), and rows scored about the threshold are right at LOCAL_PRECISION; inf where none is (a
    score of 0 never applies a label)."""
    values = np.asarray(scores, dtype=float)
    if values.size == 0:
        return np.inf
    order = np.argsort(-values, kind="stable")
    values, carried = values[order], np.asarray(carried, dtype=bool)[order]
    hits = np.cumsum(carried)
    kept = np.arange(1, values.size + 1)
    last_of_tie = np.append(values[1:] < values[:-1], True)  # "score >= t" keeps every tie of t
    precision = (hits + PSEUDO_COUNTS) / (kept + 2 * PSEUDO_COUNTS)
    if PRECISION_Z:
        precision = wilson_lower_bound(hits, kept, PRECISION_Z)
    reaches = last_of_tie & (precision >= target - 1e-9)
    if LOCAL_PRECISION:
        reaches &= local_precision(values, carried) >= LOCAL_PRECISION - 1e-9
    return max(float(values[reaches][-1]), 1e-9) if reaches.any() else np.inf


def local_precision(values: np.ndarray, carried: np.ndarray) -> np.ndarray:
    """How often a row scored about as each of `values` carries the label: the isotonic (monotone in the
    score) fit of `carried` on `values`, so that a threshold's own neighbourhood, not only the rows above
    it, is right often enough."""
    from sklearn.isotonic import IsotonicRegression

    return IsotonicRegression(out_of_bounds="clip").fit(values, carried.astype(float)).predict(values)


def wilson_lower_bound(right: np.ndarray, applied: np.ndarray, z: float) -> np.ndarray:
    """The Wilson score interval's lower end of `right` of `applied` at `z` standard errors."""
    share, z2 = right / applied, z * z
    centre = share + z2 / (2 * applied)
    spread = z * np.sqrt(share * (1 - share) / applied + z2 / (4 * applied ** 2))
    return (centre - spread) / (1 + z2 / applied)


def thresholds_on_memory(vectors: np.ndarray, carries: np.ndarray, served: np.ndarray, k: int,
                         target: float) -> np.ndarray:
    """Per label, the lowest threshold at which the memory's own rows, each scored by the others, are
    labelled at `target` precision; inf where none reaches it or the label is not served yet."""
    result = np.full(carries.shape[1], np.inf)
    if len(vectors) < 2 or not served.any():
        return result
    scores = loo_votes(vectors, carries, k)
    for label in np.flatnonzero(served):
        result[label] = threshold_at(scores[:, label], carries[:, label], target)
    return result


# ---- the head: one logistic regression per label on the memory's embeddings ---------------------------

HEAD_C = 1.0  # inverse L2 strength of a label's logistic regression (sklearn's default)
HEAD_FOLDS = 5  # folds of the cross-fit that scores each memory row by a head fitted without it
PRIOR_SCALE = 4.0  # the label's prior similarity as a head's feature, scaled: its weight costs less L2


@dataclass(frozen=True)
class LabelHead:
    """One label's logistic regression: P(label | embedding) = sigmoid(features · weights + bias)."""

    weights: np.ndarray
    bias: float

    def score(self, features) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(np.asarray(features @ self.weights).ravel() + self.bias)))


def _regression():
    from sklearn.linear_model import LogisticRegression

    # balanced: a label on 2 % of the issues weighs as much as the rest; thresholds set the precision
    return LogisticRegression(C=HEAD_C, class_weight="balanced", max_iter=1000)


def fit_head(features, carried: np.ndarray) -> LabelHead:
    """The label's head fitted on every row (`carried`: the rows that carry it)."""
    model = _regression().fit(features, np.asarray(carried, dtype=bool))
    return LabelHead(model.coef_[0].astype(np.float64), float(model.intercept_[0]))


def cross_fitted(features, carried: np.ndarray, folds: int = HEAD_FOLDS, seed: int = 0) -> np.ndarray:
    """Each row's head probability from a head fitted on the other folds: what the threshold is chosen on."""
    from sklearn.model_selection import StratifiedKFold

    carried = np.asarray(carried, dtype=bool)
    folds = min(folds, int(carried.sum()), int((~carried).sum()))
    scores = np.zeros(len(carried))
    if folds < 2:
        return scores
    for train, held in StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(carried)),
                                                                                    carried):
        scores[held] = fit_head(features[train], carried[train]).score(features[held])
    return scores


def label_text(name: str, description: str | None) -> str:
    """What a label's prior embeds: its name, and its GitHub description where it has one."""
    words = name.replace("-", " ").replace("_", " ").replace(":", ": ").replace("/", " / ")
    return f"{words}: {description}" if description else words


@dataclass(frozen=True)
class OwnScore:
    """One own label's decision input: its score, the threshold it needs (None: not served) and examples."""

    label: str
    score: float
    threshold: float | None  # None: fewer than min_examples confirmed, or no threshold keeps the target
    examples: int


@dataclass(frozen=True)
class OwnLabelMemory:
    """A repository's confirmed issues as one model version embedded them, and the own labels they carry."""

    vectors: np.ndarray  # (n, d) float32, rows L2-normalised (core.memory's rows)
    labels: list[frozenset[str]]  # the own labels a human confirmed on each row's issue
    examples: dict[str, int] = field(default_factory=dict)  # label → confirmed examples in the repository
    issue_ids: list[int] = field(default_factory=list)  # each row's issue (core.tables.IssueRecord.id)
    texts: list[str] | None = None  # each row's issue text, read only where rules are fitted (with_texts)

    def __len__(self) -> int:
        return len(self.labels)

    def carries(self, names: Sequence[str]) -> np.ndarray:
        """(rows, names) 0/1: which row carries which label."""
        return np.array([[name in row for name in names] for row in self.labels], dtype=np.float32
                        ).reshape(len(self), len(names))

    def votes(self, vector: Sequence[float], names: Sequence[str], k: int = NEIGHBOURS) -> np.ndarray:
        """Each of `names`' vote for the issue embedded as `vector` (0 for an empty memory)."""
        if not len(self) or not names:
            return np.zeros(len(names))
        return vote((self.vectors @ _normalised(vector))[None, :], self.carries(names), k)[0]


def _normalised(vector: Sequence[float]) -> np.ndarray:
    query = np.asarray(vector, dtype=np.float32)
    return query / (float(np.linalg.norm(query)) or 1.0)


def memory_of(session: Session, rows: MemoryRows, repository_id: int, *, exclude_issue: int | None = None
              ) -> OwnLabelMemory:
    """The memory's rows (core.memory.read_rows, read once for the kind too) with the own labels each
    carries: only the examples table is read here."""
    carried: dict[int, set[str]] = {}
    for issue_id, label in session.execute(
            select(OwnLabelExample.issue_id, OwnLabelExample.label).join(
                IssueRecord, IssueRecord.id == OwnLabelExample.issue_id)
            .where(IssueRecord.repository_id == repository_id)):
        carried.setdefault(issue_id, set()).add(label)
    examples = Counter(label for issue_id, labels in carried.items() if issue_id != exclude_issue
                       for label in labels)
    if not len(rows):
        return OwnLabelMemory(np.zeros((0, 0), dtype=np.float32), [], dict(examples))
    return OwnLabelMemory(rows.vectors, [frozenset(carried.get(issue_id, ())) for issue_id in rows.issue_ids],
                          dict(examples), list(rows.issue_ids))


def with_texts(session: Session, memory: OwnLabelMemory) -> OwnLabelMemory:
    """`memory` with each row's issue text (what the model read: core.issue_text), for a fit that uses the
    words (SCORING with tfidf); the labelling job's scoring never needs them."""
    from core.issue_text import format_issue_text

    stored = {issue_id: (title, body) for issue_id, title, body in session.execute(
        select(IssueRecord.id, IssueRecord.title, IssueRecord.body).where(IssueRecord.id.in_(memory.issue_ids)))}
    return replace(memory, texts=[format_issue_text(*stored.get(issue_id, ("", ""))) for issue_id in memory.issue_ids])


def recall(session: Session, repository_id: int, version: str, *, exclude_issue: int | None = None
           ) -> OwnLabelMemory:
    """The repository's memory rows (core.memory, as `version` embedded them) with their own labels."""
    rows = read_rows(session, repository_id, version, exclude_issue=exclude_issue)
    return memory_of(session, rows, repository_id, exclude_issue=exclude_issue)


# ---- the rules a labelling job applies, fitted on the memory by the feedback queue -------------------

@dataclass(frozen=True)
class OwnLabelRules:
    """Each own label's threshold at the target precision and, where it is served, its head: fitted on the
    repository's memory (`fit_rules`), stored as data (core.own_label_fits), applied per issue (`score`)."""

    examples: dict[str, int]  # label → confirmed examples when fitted
    thresholds: dict[str, float]  # served labels only; inf: no threshold kept the target
    heads: dict[str, LabelHead] = field(default_factory=dict)
    words: WordFeatures | None = None  # the heads' TF-IDF vocabulary, where SCORING uses the words
    scoring: str = "vote"  # the SCORING they were fitted for (stored with them)

    def score(self, vector: Sequence[float], names: Sequence[str], memory: OwnLabelMemory | None = None,
              *, text: str | None = None, examples: Mapping[str, int] | None = None,
              k: int = NEIGHBOURS) -> list[OwnScore]:
        """Each of `names`' score for the issue embedded as `vector` (its text `text`, needed where the heads
        read words) and the threshold it needs: a served label's by the scoring it was fitted for, any
        other's (a suggestion at most) by the memory's vote. `examples`: the counts to show (the memory's,
        newer than the fit's)."""
        examples = {**self.examples, **(examples or {})}
        votes = memory.votes(vector, names, k) if memory is not None else np.zeros(len(names))
        features = _normalised(vector).astype(np.float64)[None, :]
        if reads_text(self.scoring) and self.heads and text is None:
            raise ValueError("these own-label rules read the issue's words: score(..., text=) is needed")
        if self.words is not None and self.heads:
            features = self.words.features(features, [text], with_vectors=reads_vectors(self.scoring))
        result = []
        for name, voted in zip(names, votes, strict=True):
            threshold = self.thresholds.get(name)
            score = float(voted)
            if threshold is not None and name in self.heads:
                head = self.heads[name].score(with_name(features, name, [text], self.scoring))
                score = _combine(float(head[0]), float(voted), self.scoring)
            served = threshold is not None and np.isfinite(threshold)
            result.append(OwnScore(name, round(score, 4), float(threshold) if served else None,
                                   examples.get(name, 0)))
        return result


# What a served label is scored by (bench.own_labels replays each): the memory's `vote`; a `head` per label
# (logistic regression) on the embeddings, with `tfidf` on the text's words too and `name` on whether the
# label's own name occurs in the issue (core.own_label_names); `tfidf` alone: a head on the words only (the
# embedding where the memory's texts share no word); `+vote`: the mean of the head's probability and the vote.
SCORINGS = ("vote", "head", "head+vote", "head+tfidf", "head+tfidf+vote", "head+tfidf+name", "tfidf")
SCORING = "head+tfidf"  # bench.own_labels on huggingface/datasets: the best precision and recall of all


def uses_words(scoring: str) -> bool:
    return "tfidf" in scoring


def reads_vectors(scoring: str) -> bool:
    """Whether a head reads the issue's embedding beside its words (every head but `tfidf` alone's)."""
    return scoring.split("+")[0] != "tfidf"


def uses_names(scoring: str) -> bool:
    return "name" in scoring.split("+")


def reads_text(scoring: str) -> bool:
    """Whether the heads read the issue's text (its words or the label's name in it), not only its vector."""
    return uses_words(scoring) or uses_names(scoring)


def with_name(features, label: str, texts: Sequence[str], scoring: str):
    """A label's head input: the shared `features`, then, where the scoring reads names, the label's name
    columns for `texts` (core.own_label_names), the same at fit and at scoring."""
    if not uses_names(scoring):
        return features
    columns = name_columns(label, texts)
    if hasattr(features, "tocsr"):
        from scipy.sparse import csr_matrix, hstack

        return hstack([features, csr_matrix(columns)]).tocsr()
    return np.hstack([features, columns])


def _combine(head, voted, scoring: str):
    return (head + voted) / 2 if scoring.endswith("+vote") else head


def fit_rules(memory: OwnLabelMemory, *, min_examples: int, target: float, k: int = NEIGHBOURS) -> OwnLabelRules:
    """The rules for every label with `min_examples` confirmed examples that the memory's rows carry: each
    threshold chosen on the memory's own rows, each scored without itself (the vote leave-one-out, the head
    cross-fitted in HEAD_FOLDS folds), the head then fitted on every row. A label the maintainers stopped
    using (`stopped_using`) gets no threshold: bench.own_labels on huggingface/datasets, whose labels mostly
    went out of use, 0.832 -> 0.861 micro precision at STOPPED_EXPECTED 5 (recall 0.460 -> 0.443)."""
    scoring = SCORING
    if scoring not in SCORINGS:
        raise ValueError(f"core.own_labels.SCORING is {scoring!r}: one of {', '.join(SCORINGS)}")
    names = sorted(name for name, n in memory.examples.items() if n >= min_examples)
    carries = memory.carries(names)
    served = [i for i, name in enumerate(names) if carries[:, i].any() and not carries[:, i].all()]
    thresholds, heads = {name: np.inf for name in names}, {}
    if len(memory) < 2 or not served:
        return OwnLabelRules(dict(memory.examples), thresholds, scoring=scoring)
    features, words = memory.vectors.astype(np.float64), None
    if reads_text(scoring) and memory.texts is None:
        raise ValueError(f"scoring {scoring} reads the memory's texts: fit on with_texts(session, memory)")
    if uses_words(scoring):
        words = WordFeatures.fit(memory.texts)
        if words is not None:
            features = words.features(features, memory.texts, with_vectors=reads_vectors(scoring))
    votes = loo_votes(memory.vectors, carries, k)
    from threadpoolctl import threadpool_limits

    # one BLAS thread: the heads' matrices are small, and two threads fitted one 7x slower than one on a
    # shared 2-core AMD EPYC (Zen 4; 2,500 rows x 384: 1.60 s against 0.22 s, load ~5)
    with threadpool_limits(1):
        for i in served:
            carried = carries[:, i] > 0
            if stopped_using(carried):
                continue  # its threshold stays inf: suggested on the review page, no longer applied
            own = with_name(features, names[i], memory.texts, scoring)
            scores = (_combine(cross_fitted(own, carried), votes[:, i], scoring) if scoring != "vote"
                      else votes[:, i])
            thresholds[names[i]] = threshold_at(scores, carried, target)
            if scoring != "vote":
                heads[names[i]] = fit_head(own, carried)
    return OwnLabelRules(dict(memory.examples), thresholds, heads, words, scoring)


def confirm(session: Session, issue: IssueRecord, label: str, actor: str | None) -> None:
    """A human (or the backfill, from the repository's history) confirmed `label` on the issue."""
    if session.scalar(select(OwnLabelExample.id).where(OwnLabelExample.issue_id == issue.id,
                                                       OwnLabelExample.label == label)) is None:
        session.add(OwnLabelExample(issue_id=issue.id, label=label, confirmed_by=actor))
        session.flush()


def unconfirm(session: Session, issue: IssueRecord, label: str) -> None:
    """A human took `label` off the issue: it is no example of it any more."""
    session.execute(delete(OwnLabelExample).where(OwnLabelExample.issue_id == issue.id,
                                                  OwnLabelExample.label == label))


def in_areas(label: str, areas: Sequence[str] | None) -> bool:
    """Whether the config's `areas` take `label`: None takes every candidate; an entry is a label's name,
    or a prefix when it ends in `:`, `/`, `-`, `_`, `.` or `*` (`module:`, `area-`, `area/*`)."""
    if areas is None:
        return True
    return any(label == area or (area[-1:] in ":/-_.*" and label.startswith(area.rstrip("*")))
               for area in areas)
