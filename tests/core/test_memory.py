"""The memory's rule and store (core.memory): pure functions and a SQLite session, no model."""

import numpy as np
import pytest
from sqlalchemy import func, select

from core import memory, store
from core.db import session_scope
from core.memory import Memory, MemoryRule, Neighbour, adjust_scores, class_of, knn_vote
from core.tables import IssueRecord, MemoryEntry, ModelPromotion, ModelVersion, Repository
from tests.fakes import FakeEncoder

MODEL = {"bug": 0.5, "feature": 0.3, "question": 0.2}


def test_an_empty_memory_leaves_the_models_scores_as_they_are():
    assert adjust_scores(MODEL, [], {}) == MODEL


def test_the_adjusted_scores_are_probabilities_over_the_same_classes():
    adjusted = adjust_scores(MODEL, [Neighbour("question", 0.9)] * 10, {"question": 30, "bug": 5})
    assert set(adjusted) == set(MODEL) and sum(adjusted.values()) == pytest.approx(1.0)
    assert all(value > 0 for value in adjusted.values())


def test_similar_confirmed_issues_of_another_kind_overturn_an_unsure_model():
    neighbours = [Neighbour("question", 0.8)] * 10
    adjusted = adjust_scores(MODEL, neighbours, {"bug": 30, "feature": 30, "question": 30})
    assert max(adjusted, key=adjusted.get) == "question"


def test_the_repositorys_label_frequencies_alone_leave_the_scores_where_the_model_put_them():
    adjusted = adjust_scores(MODEL, [], {"question": 90, "bug": 5, "feature": 5})
    assert adjusted == pytest.approx(MODEL)


def test_the_first_confirmed_issue_counts_at_once_with_the_served_constants():
    adjusted = adjust_scores(MODEL, [Neighbour("feature", 0.8)], {"feature": 1})
    assert max(adjusted, key=adjusted.get) == "feature"


def test_without_kNN_weight_the_scores_do_not_move():
    adjusted = adjust_scores(MODEL, [Neighbour("question", 1.0)], {"question": 50}, rule=MemoryRule(knn_weight=0.0))
    assert adjusted == pytest.approx(MODEL)


EVEN = {"bug": 1 / 3, "feature": 1 / 3, "question": 1 / 3}  # a memory of as many issues of each kind


def test_the_knn_vote_weighs_neighbours_by_similarity_and_never_zeroes_a_class():
    vote = knn_vote([Neighbour("bug", 0.9), Neighbour("feature", 0.3), Neighbour("question", -0.5)],
                    ["bug", "feature", "question"], EVEN)
    assert vote["bug"] > vote["feature"] > vote["question"] > 0


def test_the_vote_keeps_a_minority_kind_that_a_majority_memorys_numbers_would_vote_away():
    scores = {"bug": 0.35, "feature": 0.15, "question": 0.5}  # the model rightly thinks: a question
    neighbours = [Neighbour("bug", 0.6)] * 3 + [Neighbour("question", 0.6)] * 2  # most neighbours: bugs
    counts = {"bug": 40, "feature": 10, "question": 5}  # a memory of mostly bugs: its neighbours are too
    adjusted = adjust_scores(scores, neighbours, counts, trust=1.0)
    assert max(adjusted, key=adjusted.get) == "question"


def test_in_a_balanced_memory_each_neighbour_counts_by_its_similarity_alone():
    neighbours = [Neighbour("bug", 0.9), Neighbour("feature", 0.4)]
    vote = knn_vote(neighbours, list(EVEN), EVEN, smoothing=0.05)
    assert vote["bug"] == pytest.approx(0.95 / 1.45) and vote["feature"] == pytest.approx(0.45 / 1.45)


def test_a_vote_without_trust_leaves_the_scores_where_the_model_put_them():
    adjusted = adjust_scores(MODEL, [Neighbour("question", 1.0)] * 5, {"question": 50}, trust=0.0)
    assert adjusted == pytest.approx(MODEL)


def clustered(per_kind: int, kinds=("bug", "feature", "question"), seed: int = 0) -> Memory:
    """A memory whose issues of each kind look alike (its neighbours name their kind)."""
    rng = np.random.default_rng(seed)
    centres = np.eye(8)[: len(kinds)]
    labels = [kind for kind in kinds for _ in range(per_kind)]
    vectors = np.repeat(centres, per_kind, axis=0) + rng.normal(scale=0.1, size=(len(labels), 8))
    order = rng.permutation(len(labels))  # the latest rows are of every kind
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True))[order].astype(np.float32)
    return Memory(vectors, [labels[i] for i in order])


def test_the_self_check_tells_a_memory_that_predicts_itself_from_one_that_does_not():
    good = clustered(20)
    agreement, majority = memory.self_check_agreement(good.vectors, good.labels, k=5,
                                                      rows=range(len(good) - 30, len(good)))
    assert agreement > 0.9 and majority < 0.5
    shuffled = np.random.default_rng(1).permutation(good.labels).tolist()  # the same issues, labels at random
    agreement, _ = memory.self_check_agreement(good.vectors, shuffled, k=5, rows=range(len(good) - 30, len(good)))
    assert agreement < 0.6


def test_the_vote_weighs_only_where_it_beats_the_models_own_answers_on_the_latest_issues():
    """The served self-check: a memory whose vote names its latest issues' kinds better than the model did
    gets its full weight; one whose model was already right on them leaves the model's scores alone."""
    good = clustered(20)
    unsure = {"bug": 0.4, "feature": 0.3, "question": 0.3}
    wrong_model = Memory(good.vectors, good.labels, model_labels=["bug"] * len(good))  # a third right
    right_model = Memory(good.vectors, good.labels, model_labels=list(good.labels))
    assert wrong_model.trust == 1.0 and right_model.trust == 0.0
    question = good.vectors[good.labels.index("question")]
    assert wrong_model.adjust(unsure, question)["question"] > 0.5
    assert right_model.adjust(unsure, question) == pytest.approx(unsure)


def test_the_models_answer_is_read_from_its_stored_scores_a_tie_naming_none():
    classes = ["bug", "feature", "question"]
    assert memory.model_label({"bug": 0.2, "feature": 0.7, "question": 0.1}, classes) == "feature"
    assert memory.model_label({"bug": 0.4, "feature": 0.4, "question": 0.2}, classes) == ""
    assert memory.model_label(None, classes) is None and memory.model_label({"bug": 1.0}, classes) is None


@pytest.mark.parametrize("label,classes,expected", [
    ("bug", ["bug", "feature"], "bug"), ("enhancement", ["bug", "feature"], "feature"),
    ("Type: Bug", ["bug"], "bug"), ("wontfix", ["bug", "feature"], None), ("area: ui", ["area: ui"], "area: ui"),
])
def test_a_confirmed_label_counts_for_the_model_class_it_stands_for(label, classes, expected):
    assert class_of(label, classes) == expected


def test_the_nearest_confirmed_issues_are_the_most_similar_first():
    vectors = np.array([[1, 0, 0], [0, 1, 0], [0.9, 0.1, 0]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    nearest = Memory(vectors, ["bug", "feature", "question"]).nearest([1.0, 0.05, 0.0], k=2)
    assert [n.label for n in nearest] == ["bug", "question"] and nearest[0].similarity > nearest[1].similarity


def remembered(session, repo: str, number: int, label: str, vector, version: str = "v1",
               size: int = memory.MEMORY_SIZE):
    issue, _ = store.upsert_issue(session, store.ensure_repository(session, repo), number, title="t", body="b",
                                  author_login="a", state="open")
    issue.confirmed_label = label
    memory.remember(session, issue, label, version, vector, size=size)
    return issue


def test_the_memory_is_stored_per_repository_and_version(sessions):
    with session_scope(sessions) as session:
        remembered(session, "o/a", 1, "bug", [1.0, 0.0])
        remembered(session, "o/a", 2, "enhancement", [0.0, 2.0])
        remembered(session, "o/b", 1, "question", [1.0, 0.0])
        remembered(session, "o/a", 3, "question", [1.0, 0.0], version="v2")
    with session_scope(sessions) as session:
        repo_a = store.ensure_repository(session, "o/a")
        recalled = memory.read_rows(session, repo_a.id, "v1").to_memory(["bug", "feature", "question"])
        assert sorted(recalled.labels) == ["bug", "feature"]
        assert np.allclose(np.linalg.norm(recalled.vectors, axis=1), 1.0)  # stored normalised, float32
        assert len(memory.read_rows(session, repo_a.id, "v3").to_memory(["bug"])) == 0


def test_remembering_an_issue_again_replaces_its_entry_and_forgetting_drops_it(sessions):
    with session_scope(sessions) as session:
        remembered(session, "o/a", 1, "bug", [1.0, 0.0])
        issue = remembered(session, "o/a", 1, "question", [0.0, 1.0])
        assert session.scalars(select(MemoryEntry.label)).all() == ["question"]
        memory.forget(session, issue)
        assert session.scalars(select(MemoryEntry)).all() == []


def test_the_memory_keeps_the_newest_entries_of_a_repository(sessions):
    with session_scope(sessions) as session:
        for number in range(1, 6):
            remembered(session, "o/a", number, "bug", [1.0, float(number)], size=3)
        remembered(session, "o/b", 1, "bug", [1.0, 0.0], size=3)
        kept = session.execute(select(MemoryEntry.issue_id, MemoryEntry.repository_id)).all()
        assert len(kept) == 4  # three of o/a, and o/b's own


def test_stored_newest_first_as_a_fill_does_the_memory_keeps_and_recalls_by_confirmation(sessions):
    """The fill stores the newest confirmed issues first: the trim must keep those, not the last rows
    stored, and recall gives them oldest-confirmed first (the self-check's latest are the last)."""
    import datetime as dt

    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    labels = {1: "bug", 2: "question", 3: "bug", 4: "enhancement", 5: "question"}
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, "o/a")
        for number in sorted(labels, reverse=True):  # newest first
            issue, _ = store.upsert_issue(session, repository, number, title=f"t{number}", body="",
                                          author_login="a", state="open")
            issue.confirmed_label, issue.confirmed_at = labels[number], start + dt.timedelta(days=number)
            memory.remember(session, issue, labels[number], "v1", [1.0, float(number)], size=3)
        kept = session.scalars(select(IssueRecord.number).join(MemoryEntry, MemoryEntry.issue_id == IssueRecord.id)
                               .order_by(IssueRecord.number)).all()
        assert kept == [3, 4, 5]
        recalled = memory.read_rows(session, repository.id, "v1").to_memory(["bug", "feature", "question"])
        assert recalled.labels == ["bug", "feature", "question"]  # issues 3, 4, 5 in that order


def test_confirmed_issues_the_serving_version_has_not_embedded_are_found_for_the_fill(sessions):
    with session_scope(sessions) as session:
        old = remembered(session, "o/a", 1, "bug", [1.0, 0.0], version="old")
        repository_id = old.repository_id
        assert [i.number for i in memory.not_embedded(session, repository_id, "new")] == [1]
        assert memory.not_embedded(session, repository_id, "old") == []
        memory.drop_other_versions(session, repository_id, "new")
        assert session.scalars(select(MemoryEntry)).all() == []


def confirmed_issues(session, count: int, repo: str = "o/a"):
    """`count` confirmed issues, as a backfill stores them: text and label, nothing embedded."""
    repository = store.ensure_repository(session, repo)
    for number in range(1, count + 1):
        issue, _ = store.upsert_issue(session, repository, number, title=f"Issue {number}", body=f"crash {number}",
                                      author_login="a", state="closed")
        issue.confirmed_label, issue.confirmed_by = "bug", "backfill"
    session.flush()
    return repository


def serve(session, version: str) -> None:
    """Make `version` the global model (a registry row and its promotion, no files)."""
    row = ModelVersion(version=version, path=f"/models/{version}", labels=["bug", "feature", "question"])
    session.add(row)
    session.flush()
    session.add(ModelPromotion(model_version_id=row.id, reason="test"))
    session.flush()


def test_a_fill_embeds_the_confirmed_issues_in_batches_committing_after_each(sessions):
    encoder, commits = FakeEncoder({"crash": "bug"}), []
    with session_scope(sessions) as session:
        repository = confirmed_issues(session, 10)
        progress = memory.fill(session, repository.id, encoder, batch=4, checkpoint=lambda: commits.append(
            session.scalar(select(func.count(MemoryEntry.id)))))
        assert (progress.embedded, progress.of, progress.complete) == (10, 10, True)
        assert commits[:3] == [4, 8, 10]  # a commit after every batch
        entries = session.scalars(select(MemoryEntry)).all()
        assert len(entries) == 10 and {e.model_version for e in entries} == {"fake-1"}
        assert all(e.scores and max(e.scores, key=e.scores.get) == "bug" for e in entries)  # the model's own
        assert memory.stored_progress(repository).describe() == "10 of 10 issues embedded by fake-1"


def test_a_fill_is_bounded_by_the_memorys_size_newest_first(sessions):
    encoder = FakeEncoder({})
    with session_scope(sessions) as session:
        repository = confirmed_issues(session, 5)
        progress = memory.fill(session, repository.id, encoder, batch=2, size=3)
        embedded = session.scalars(select(IssueRecord.number).join(MemoryEntry, MemoryEntry.issue_id == IssueRecord.id)
                                   .order_by(IssueRecord.number)).all()
    assert (progress.embedded, progress.of) == (3, 3) and len(encoder.embedded) == 3
    assert embedded == [3, 4, 5]  # the same confirmation time: the newest rows


def test_an_interrupted_fill_continues_where_its_last_batch_was_committed(sessions):
    with session_scope(sessions) as session:
        repository_id = confirmed_issues(session, 10).id
    with pytest.raises(RuntimeError, match="died"), session_scope(sessions) as session:
        memory.fill(session, repository_id, FakeEncoder({}, fail_after=6), batch=4, checkpoint=session.commit)
    with session_scope(sessions) as session:
        assert memory.stored_progress(session.get(Repository, repository_id)).describe() == (
            "4 of 10 issues embedded by fake-1")
        again = FakeEncoder({})
        assert memory.fill(session, repository_id, again, batch=4, checkpoint=session.commit).complete
        assert len(again.embedded) == 6  # only what the crash lost
        assert session.scalar(select(func.count(MemoryEntry.id))) == 10


def test_a_complete_fill_drops_other_versions_only_while_its_version_serves(sessions):
    with session_scope(sessions) as session:
        repository = confirmed_issues(session, 3)
        memory.fill(session, repository.id, FakeEncoder({}, version="old"))
        serve(session, "newest")  # promoted while an older worker still fills with "new"
        memory.fill(session, repository.id, FakeEncoder({}, version="new"))
        assert sorted(set(session.scalars(select(MemoryEntry.model_version)))) == ["new", "old"]
        serve(session, "new")
        memory.fill(session, repository.id, FakeEncoder({}, version="new"))  # nothing left to embed
        assert set(session.scalars(select(MemoryEntry.model_version))) == {"new"}


def test_a_fill_of_a_bad_batch_size_says_so(sessions):
    with session_scope(sessions) as session, pytest.raises(ValueError, match="batch must be at least 1"):
        memory.fill(session, confirmed_issues(session, 1).id, FakeEncoder({}), batch=0)


@pytest.mark.slow
def test_the_served_encoder_embeds_each_text_as_it_scores_it(tiny_model_dir):
    from core.classifier import load_classifier

    classifier = load_classifier(tiny_model_dir)
    texts = ["Crash on save\n\nTraceback: TypeError in save()", "Add a dark mode", "How do I set a proxy? " * 20]
    scores, vectors = classifier.predict_and_embed(texts)
    assert scores == [pytest.approx(row) for row in classifier.predict(texts)]
    alone = [classifier.embed([text])[0] for text in texts]  # batched and length-sorted: same order back
    assert np.allclose(classifier.embed(texts), alone, atol=1e-5) and np.allclose(vectors, alone, atol=1e-5)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5) and len(vectors[0]) == 384
