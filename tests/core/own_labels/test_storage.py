"""The own labels' rules stored as data (core.own_labels.storage): fitted once for a model version, target,
min_examples and knobs, read as stored by the labelling job however the memory moved, refitted by the
feedback queue's refresh when it did."""


import numpy as np
import pytest
from sqlalchemy import select

from core import memory, store
from core.db import session_scope
from core.own_labels import OwnLabelParams, storage
from core.own_labels.storage import Refits
from core.tables import OwnLabelFit
from tests.sql_statements import statements

VERSION = "v1"
TOPIC = np.eye(8)[0]


@pytest.fixture
def repo(sessions) -> int:
    with session_scope(sessions) as session:
        return store.ensure_repository(session, "octo/widgets", 1).id


def remember(session, repo: int, first: int, count: int, *, streaming: bool, version: str = VERSION) -> None:
    """`count` confirmed issues from number `first` on: about streams (and carrying `streaming`) or not. The
    tests remember the label's issues last: in use up to the newest row (core.own_labels.heads.stopped_using)."""
    rng = np.random.default_rng(first)
    repository = store.find_repository(session, full_name="octo/widgets")
    for number in range(first, first + count):
        issue, _ = store.upsert_issue(session, repository, number, body="",
                                      title=f"the stream stops, issue {number}" if streaming else f"issue {number}",
                                      author_login="x", state="closed")
        issue.confirmed_label = "bug"
        session.flush()
        vector = rng.normal(size=8) * 0.5 + (TOPIC if streaming else np.eye(8)[3])
        memory.remember(session, issue, "bug", version, vector)
        if streaming:
            storage.confirm(session, issue, "streaming", "maintainer")


def read(session, repo, *, target=0.85, min_examples=5, version=VERSION, stale_ok=True, fitted=None,
         params=OwnLabelParams()):
    def memory_now():
        if fitted is not None:
            fitted.append(version)
        return storage.recall(session, repo, version)
    return storage.stored_rules(session, repo, version, target=target, min_examples=min_examples,
                                memory=memory_now, stale_ok=stale_ok, params=params)


def test_stored_rules_read_words_score_as_the_fitted_ones_and_hold_no_pickle(sessions, repo):
    """The heads read the embedding and the words: stored with their vocabulary, they score every issue
    exactly as the fitted ones."""
    with session_scope(sessions) as session:
        remember(session, repo, 20, 30, streaming=False)
        remember(session, repo, 1, 12, streaming=True)
        fitted = read(session, repo)  # the texts are read from the issues for this fit
    assert fitted.words is not None and "stream" in fitted.words.terms
    with session_scope(sessions) as session:
        row = session.scalars(select(OwnLabelFit)).one()
        assert set(row.labels) == {"streaming"} and len(row.words["terms"]) == len(row.words["idf"])
        assert len(row.weights) == 8 * (8 + len(row.words["terms"]))  # one float64 head over embedding and words
        stored = storage.decode(row)
        mem = storage.recall(session, repo, VERSION)
    for vector, text in ((TOPIC, "the stream stops"), (np.eye(8)[3], "issue 99"), (np.ones(8), "")):
        assert stored.score(vector, ["streaming"], mem, text=text) == fitted.score(vector, ["streaming"], mem,
                                                                                 text=text)
    assert stored.thresholds == fitted.thresholds and np.isfinite(stored.thresholds["streaming"])
    with pytest.raises(ValueError, match="text="):
        stored.score(TOPIC, ["streaming"], mem)


def test_the_labelling_read_serves_what_is_stored_and_the_refresh_refits_where_the_memory_moved(sessions, repo):
    with session_scope(sessions) as session:
        remember(session, repo, 20, 30, streaming=False)
        remember(session, repo, 1, 12, streaming=True)
        first = read(session, repo)
        remember(session, repo, 60, 8, streaming=True)  # eight more examples: the stored fit is stale
    fitted = []
    with session_scope(sessions) as session, statements(sessions) as seen:
        assert read(session, repo, fitted=fitted).examples == first.examples == {"streaming": 12}
    assert fitted == [] and not [sql for sql in seen if "memory_entries" in sql]  # read, not refitted
    with session_scope(sessions) as session:
        refreshed = storage.refresh_stored(session, repo)
        assert refreshed.examples == {"streaming": 20}
        assert storage.refresh_stored(session, repo) is not None
    fitted = []
    with session_scope(sessions) as session:
        assert read(session, repo, stale_ok=False, fitted=fitted).examples == {"streaming": 20}
    assert fitted == []  # the refresh stored what the memory holds now


def test_another_target_min_examples_or_version_is_fitted_not_read(sessions, repo):
    with session_scope(sessions) as session:
        remember(session, repo, 20, 30, streaming=False)
        remember(session, repo, 1, 12, streaming=True)
        read(session, repo)
        fitted = []
        read(session, repo, target=0.95, fitted=fitted)
        assert read(session, repo, target=0.95, min_examples=13, fitted=fitted).thresholds == {}
        assert fitted == [VERSION, VERSION]
        remember(session, repo, 20, 30, streaming=False, version="v2")
        remember(session, repo, 1, 12, streaming=True, version="v2")
        assert storage.refresh_stored(session, repo, "v2").examples == {"streaming": 12}
        assert session.scalars(select(OwnLabelFit)).one().model_version == "v2"


def test_nothing_is_refreshed_before_a_labelling_job_fitted_own_labels(sessions, repo):
    with session_scope(sessions) as session:
        remember(session, repo, 1, 12, streaming=True)
        assert storage.refresh_stored(session, repo) is None
        assert session.scalars(select(OwnLabelFit)).all() == []


def test_fits_stored_under_other_knobs_are_fitted_anew_not_read(sessions, repo):
    """An upgrade that changes the rule's knobs (here the thresholds' local floor), or fits stored by an
    older rule whose key named no knobs, must not serve what was stored until the memory happens to move."""
    floorless = OwnLabelParams(local_precision=0.0)
    with session_scope(sessions) as session:
        remember(session, repo, 20, 30, streaming=False)
        remember(session, repo, 1, 12, streaming=True)
        fitted = []
        read(session, repo, fitted=fitted)
        read(session, repo, fitted=fitted)
        assert fitted == [VERSION]  # fitted once, then read
        read(session, repo, fitted=fitted, params=floorless)
        assert fitted == [VERSION, VERSION]
        assert storage.refresh_stored(session, repo, params=floorless) is not None
        row = session.scalars(select(OwnLabelFit)).one()
        assert row.key[3] == floorless.key() == {**OwnLabelParams().key(), "local_precision": 0.0}
        row.key = [VERSION, 0.85, 5, "head+tfidf", "pseudo 0, z 0, local 0.5, stopped 5", *row.key[4:]]
        session.flush()
        read(session, repo, fitted=fitted)
        assert fitted == [VERSION, VERSION, VERSION]


def test_a_large_memory_is_refitted_once_it_moved_enough_or_its_fit_aged_not_on_every_decision(sessions, repo):
    refits = Refits(small_memory=10)  # these 42 rows stand for thousands
    with session_scope(sessions) as session:
        remember(session, repo, 20, 30, streaming=False)
        remember(session, repo, 1, 12, streaming=True)
        read(session, repo)
        fitted_at = session.scalars(select(OwnLabelFit)).one().fitted_at
        remember(session, repo, 100, 1, streaming=False)  # one more row of 42: 2 %, the examples unchanged
        storage.refresh_stored(session, repo, refits=refits)
        row = session.scalars(select(OwnLabelFit)).one()
        assert row.fitted_at == fitted_at and row.key[4] == 42  # kept: not worth a refit yet

        later = store.as_utc(fitted_at) + refits.after
        storage.refresh_stored(session, repo, now=later, refits=refits)  # the fit aged: the move is taken in
        assert session.scalars(select(OwnLabelFit)).one().key[4] == 43

        remember(session, repo, 200, 3, streaming=True)  # 3 examples more of 12: 25 %, refitted at once
        assert storage.refresh_stored(session, repo, refits=refits).examples == {"streaming": 15}
        assert storage.refresh_stored(session, repo, refits=refits).examples == {"streaming": 15}  # nothing moved


def test_a_small_memory_is_refitted_on_every_move(sessions, repo):
    with session_scope(sessions) as session:
        remember(session, repo, 20, 30, streaming=False)
        remember(session, repo, 1, 12, streaming=True)
        read(session, repo)
        remember(session, repo, 100, 1, streaming=False)
        storage.refresh_stored(session, repo)
        assert session.scalars(select(OwnLabelFit)).one().key[4] == 43
