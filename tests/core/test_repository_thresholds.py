"""A repository's own thresholds (core.repository_thresholds) on a SQLite session: where its judged issues
come from (the bot's judged predictions, its history in the memory scored leave-one-out), the fall-back to
the global thresholds, and the cache on the repository's row."""

import datetime as dt

import numpy as np
import pytest

from core import memory, store
from core.db import session_scope
from core.memory import Memory
from core.repository_thresholds import judged_issues, leave_one_out, refresh_stored, repository_thresholds
from core.tables import IssueRecord, ModelVersion, Prediction, Repository
from core.thresholds import DEFAULT, GLOBAL, OWN
from tests.sql_statements import statements

CLASSES = ["bug", "feature", "question"]
VERSION = "v1"
GLOBAL_THRESHOLDS = {"bug": 0.77, "feature": 0.66}  # as a model card holds them (the blend's included)
AXES = {"bug": 0, "feature": 1, "question": 2}


def vector(kind: str, wobble: float) -> list[float]:
    """An embedding near its kind's axis, so neighbours share the kind."""
    v = [0.05] * 4
    v[AXES[kind]], v[3] = 1.0, wobble
    return v


def raw(kind: str, score: float) -> dict[str, float]:
    rest = (1 - score) / 2
    return {c: score if c == kind else rest for c in CLASSES}


@pytest.fixture
def repo(sessions):
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, "octo/repo", 1)
        session.add(ModelVersion(version=VERSION, path="unused", labels=CLASSES))
        session.add(ModelVersion(version="v0", path="unused", labels=CLASSES))
        return repository.id


def confirm(session, repository_id: int, number: int, label: str):
    repository = session.get(Repository, repository_id)
    issue, _ = store.upsert_issue(session, repository, number, title=f"issue {number}", body="",
                                  author_login="a", state="open")
    issue.confirmed_label = label
    return issue


def remember_history(session, repository_id: int, start: int, rows: list[tuple[str, str, str, float]], *,
                     version: str = VERSION):
    """(confirmed label, the kind its embedding looks like, the model's top class, its score): confirmed
    issues in the memory with the model's raw scores."""
    for offset, (label, looks_like, predicted, score) in enumerate(rows):
        issue = confirm(session, repository_id, start + offset, label)
        memory.remember(session, issue, label, version, vector(looks_like, offset / 100),
                        scores=raw(predicted, score))


RIGHT_BUGS = [("bug", "bug", "bug", 0.6 + i / 100) for i in range(20)]
WRONG_BUG = ("question", "bug", "bug", 0.99)  # a question that reads like a bug: the memory cannot save it


def predict(session, repository_id: int, number: int, scores: dict, *, decision: str | None,
            confirmed: str | None, version: str = VERSION) -> None:
    issue = confirm(session, repository_id, number, confirmed)
    version_id = session.query(ModelVersion).filter_by(version=version).one().id
    session.add(Prediction(issue_id=issue.id, model_version_id=version_id, scores=scores,
                           predicted=max(scores, key=scores.get), label=None, applied=True, outcome="applied",
                           decision=decision))
    session.flush()


def test_each_history_row_is_scored_by_the_rest_of_the_memory_never_by_itself():
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(12, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    labels = ["bug", "feature", "question"] * 4
    rows, scores = [0, 4, 11], [raw("bug", 0.5), raw("feature", 0.4), raw("question", 0.6)]
    served = leave_one_out(vectors, labels, rows, scores, trust=0.7)
    for row, own, got in zip(rows, scores, served, strict=True):
        rest = Memory(vectors[[i for i in range(12) if i != row]], [labels[i] for i in range(12) if i != row])
        without_itself = memory.adjust_scores(own, rest.nearest(vectors[row]), rest.label_counts(), trust=0.7)
        assert got == pytest.approx(without_itself)
        everyone = Memory(vectors, labels)
        with_itself = memory.adjust_scores(own, everyone.nearest(vectors[row]), everyone.label_counts(), trust=0.7)
        assert got != pytest.approx(with_itself)  # it would have voted for its own label


def test_a_kind_with_enough_history_gets_its_own_threshold_and_the_others_the_global_ones(sessions, repo):
    with session_scope(sessions) as session:
        # 22 bug predictions, 20 right (90.9 %): all of them can be labelled; 5 feature ones: too few to trust
        features = [("enhancement", "feature", "feature", 0.9)] * 5  # a repository label: its class counts
        remember_history(session, repo, 1, RIGHT_BUGS + [WRONG_BUG] * 2 + features)
        thresholds, stats = repository_thresholds(session, repo, VERSION, CLASSES, 0.9, GLOBAL_THRESHOLDS,
                                                  default_threshold=0.5)
    assert stats.kinds["bug"].source == OWN and stats.kinds["bug"].support == 22
    feature = stats.kinds["feature"]
    assert (thresholds["feature"], feature.source, feature.support) == (0.66, GLOBAL, 5)
    assert "question" not in thresholds and stats.kinds["question"].source == DEFAULT
    assert (stats.from_predictions, stats.from_history) == (0, 27)
    # the lowest bug threshold that keeps 90 %: every bug prediction, the two wrong ones included
    assert (stats.quality.judged, stats.quality.labelled, stats.quality.correct) == (27, 27, 25)


def test_the_history_is_scored_with_the_trust_the_labelling_job_serves_with_whatever_order_it_was_stored_in(
        sessions, repo):
    # 90 confirmed issues: the 30 oldest questions the model called bugs (the memory's vote saves them), the
    # 60 newest bugs it got right. The self-check judges the newest 50: the vote does no better than the
    # model there, so the labelling job gives it no weight and serves the model's scores. A fill stores the
    # newest first, so the last rows stored are the oldest confirmed.
    rows = [("question", "question", "bug", 0.6)] * 30 + [("bug", "bug", "bug", 0.7)] * 60
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with session_scope(sessions) as session:
        issues = [confirm(session, repo, number, label) for number, (label, *_) in enumerate(rows, 1)]
        for offset, issue in enumerate(issues):
            issue.confirmed_at = start + dt.timedelta(minutes=offset)
        for offset in reversed(range(len(rows))):  # newest first, as core.memory's fill stores them
            label, looks_like, predicted, score = rows[offset]
            memory.remember(session, issues[offset], label, VERSION, vector(looks_like, offset / 1000),
                            scores=raw(predicted, score))
        served_trust = memory.read_rows(session, repo, VERSION).to_memory(CLASSES).trust
        judged, _ = judged_issues(session, repo, VERSION, CLASSES)
    assert served_trust == 0.0
    assert len(judged) == 90
    # the model's own scores, unmoved by a vote the labelling job would not weigh: the 30 questions stay bugs
    assert [row.predicted for row in judged].count("bug") == 90
    assert sum(row.correct for row in judged) == 60


def test_judged_predictions_count_rejections_against_their_kind_and_win_over_the_history(sessions, repo):
    with session_scope(sessions) as session:
        remember_history(session, repo, 1, RIGHT_BUGS)
        for number in range(1, 5):  # the bot served these four; its scores there said question
            predict(session, repo, number, raw("question", 0.8), decision="corrected", confirmed="bug")
        for number in range(21, 23):
            predict(session, repo, number, raw("bug", 0.95), decision="rejected", confirmed=None)
        predict(session, repo, 23, raw("bug", 0.99), decision="accepted", confirmed="bug", version="v0")
        predict(session, repo, 24, raw("bug", 0.99), decision=None, confirmed=None)  # nobody judged it
        rows, from_predictions = judged_issues(session, repo, VERSION, CLASSES)
        _, stats = repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {}, min_support=5)
    assert (stats.from_predictions, stats.from_history) == (from_predictions, len(rows) - 6) == (6, 16)
    assert [(row.predicted, row.truth) for row in rows[:6]] == [("question", "bug")] * 4 + [("bug", None)] * 2
    assert sum(row.correct for row in rows) == 16  # the remembered bugs: not the rejections nor the questions
    assert stats.kinds["bug"].support == 18 and stats.kinds["question"].support == 4


def test_the_result_is_cached_on_the_repository_until_the_memory_grows(sessions, repo):
    with session_scope(sessions) as session:
        remember_history(session, repo, 1, RIGHT_BUGS + [WRONG_BUG] * 2)
        first = repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {})
        assert session.get(Repository, repo).threshold_cache["stats"] == first[1].to_json()
    with session_scope(sessions) as session:
        with statements(sessions) as seen:
            assert repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {}) == first
        assert not [sql for sql in seen if "embedding" in sql or "predictions.scores" in sql]  # the key only
        remember_history(session, repo, 23, [WRONG_BUG])  # 20 of 23: no longer every bug prediction
        grown = repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {})
    assert grown[1].quality.judged == 23 and grown[0]["bug"] > first[0]["bug"]
    with session_scope(sessions) as session:
        assert repository_thresholds(session, repo, VERSION, CLASSES, 0.95, {}, store=False)[1].target == 0.95
        assert session.get(Repository, repo).threshold_cache["stats"]["target"] == 0.9  # not stored


class Member:
    """A blend member that scores every text the same."""

    def __init__(self, version: str, scores: dict[str, float]):
        self.version, self.labels, self.scores = version, list(scores), scores

    def predict(self, texts, batch_size: int = 16):
        return [dict(self.scores) for _ in texts]


def test_a_blends_thresholds_apply_to_the_kinds_its_repository_has_too_few_of(sessions, repo):
    from bot.labeling.decide import LabelingPolicy
    from core.card import ModelCard
    from core.classifier import BlendedClassifier

    card = ModelCard(version=VERSION, labels=CLASSES, kind="blend", thresholds={"bug": 0.99, "question": 0.8})
    blend = BlendedClassifier(Member("enc", raw("bug", 0.9)), Member("tfidf", raw("bug", 0.9)), 0.4, card=card)
    with session_scope(sessions) as session:
        remember_history(session, repo, 1, RIGHT_BUGS + [WRONG_BUG] * 2)
        thresholds, stats = repository_thresholds(session, repo, blend.version, blend.labels, 0.9,
                                                  blend.card.thresholds)
    assert stats.kinds["bug"].source == OWN and thresholds["bug"] < 0.99  # 22 bug predictions: its own
    assert thresholds["question"] == 0.8 and stats.kinds["question"].source == GLOBAL  # none: the blend's
    policy = LabelingPolicy(threshold=0.5, per_label_thresholds=thresholds)
    score = blend.predict(["App crashes"])[0]["bug"]
    assert policy.threshold_for("bug") <= score < card.thresholds["bug"]  # labelled here, not by the card
    assert policy.threshold_for("question") == 0.8 and policy.threshold_for("feature") == 0.5


@pytest.mark.postgres
def test_the_cache_key_reads_back_equal_from_postgresql(postgres_url):
    """PostgreSQL's JSON and its timezone-aware times: a key stored there must compare equal when read."""
    from core.db import Base, make_sessionmaker
    from core.tables import utcnow

    sessions = make_sessionmaker(postgres_url)
    Base.metadata.create_all(sessions.kw["bind"])
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, "octo/repo", 1)
        session.add(ModelVersion(version=VERSION, path="unused", labels=CLASSES))
        remember_history(session, repository.id, 1, RIGHT_BUGS)
        for issue in session.query(IssueRecord):
            issue.confirmed_at = utcnow()
        first = repository_thresholds(session, repository.id, VERSION, CLASSES, 0.9, {"question": 0.8})
    with session_scope(sessions) as session, statements(sessions) as seen:
        assert repository_thresholds(session, repository.id, VERSION, CLASSES, 0.9, {"question": 0.8}) == first
    assert not [sql for sql in seen if "embedding" in sql]
    sessions.kw["bind"].dispose()


def test_the_labelling_read_serves_what_is_stored_and_the_feedback_refresh_moves_it(sessions, repo):
    """stale_ok (the labelling job's read) costs no count query and keeps the stored result while the memory
    grows; refresh_stored (the feedback queue's) recomputes it with the inputs it was stored for."""
    with session_scope(sessions) as session:
        remember_history(session, repo, 1, RIGHT_BUGS + [WRONG_BUG] * 2)
        first = repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {"question": 0.8}, stale_ok=True)
        remember_history(session, repo, 23, [WRONG_BUG])
    with session_scope(sessions) as session, statements(sessions) as seen:
        assert repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {"question": 0.8},
                                     stale_ok=True) == first
    assert not [sql for sql in seen if "count(" in sql.lower()]  # not even the key's query
    with session_scope(sessions) as session:
        refreshed = refresh_stored(session, repo)
    assert refreshed.quality.judged == 23 and refreshed.target == 0.9
    assert refreshed.kinds["question"].threshold == 0.8 and refreshed.kinds["bug"].threshold > first[0]["bug"]
    with session_scope(sessions) as session:
        assert repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {"question": 0.8},
                                     stale_ok=True)[1] == refreshed
        # another target or version is not what was stored: computed, not read
        assert repository_thresholds(session, repo, VERSION, CLASSES, 0.8, {"question": 0.8},
                                     stale_ok=True)[1].target == 0.8


def test_a_result_stored_by_an_earlier_way_of_scoring_the_history_is_recomputed_not_served(sessions, repo):
    with session_scope(sessions) as session:
        remember_history(session, repo, 1, RIGHT_BUGS + [WRONG_BUG] * 2)
        first = repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {"question": 0.8}, stale_ok=True)
        repository = session.get(Repository, repo)
        key = repository.threshold_cache["key"]
        # as stored before the key said how the history was scored: the caller's five inputs, then the counts
        repository.threshold_cache = {**repository.threshold_cache, "key": key[:5] + key[6:]}
    with session_scope(sessions) as session, statements(sessions) as seen:
        again = repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {"question": 0.8}, stale_ok=True)
    assert [sql for sql in seen if "memory_entries.embedding" in sql]  # the history scored again
    assert again == first
    with session_scope(sessions) as session, statements(sessions) as seen:  # and stored under the new key
        assert repository_thresholds(session, repo, VERSION, CLASSES, 0.9, {"question": 0.8}, stale_ok=True) == first
    assert not [sql for sql in seen if "memory_entries.embedding" in sql]


def test_nothing_is_refreshed_before_a_labelling_job_stored_a_target(sessions, repo):
    with session_scope(sessions) as session:
        remember_history(session, repo, 1, RIGHT_BUGS)
        assert refresh_stored(session, repo) is None
        assert session.get(Repository, repo).threshold_cache is None
