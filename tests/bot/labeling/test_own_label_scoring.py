"""How the service scores its own labels: the rules (core.own_labels.heads.fit_rules: each served
label's head, its threshold cross-fitted on the memory) are fitted off the labelling path, stored
(core.own_labels.storage) and read as stored; a labelling job reads the memory once, for the kind and the own
labels alike; the kind is decided the same with own labels on or off."""

import dataclasses

import numpy as np
import pytest
from sqlalchemy import select

from bot.labeling import decide as labeling
from bot.labeling.config import CONFIG_PATH
from core import memory, own_labels, store
from core.db import session_scope
from core.own_labels.heads import fit_rules
from core.own_labels.storage import decode
from core.tables import IssueRecord, OwnLabelFit
from tests.bot.labeling.test_own_labels import (
    ENCODER,
    REPOSITORY_LABELS,
    WRITES_OWN_LABELS,
    confirmed_history,
    own_decisions,
    streaming_issue,
)
from tests.bot.rules import REPO, record
from tests.bot.rules import event as issue_event
from tests.sql_statements import statements

pytestmark = pytest.mark.github(labels={REPO: REPOSITORY_LABELS},  # test_own_labels.py's repository
                                files={(REPO, CONFIG_PATH): WRITES_OWN_LABELS})


def memory_reads(seen: list[str]) -> list[str]:
    """The statements that read the memory's rows (their embeddings), not counts or ids."""
    return [sql for sql in seen if "memory_entries.embedding" in sql and sql.lstrip().upper().startswith("SELECT")]


def stored_fit(sessions) -> tuple:
    with session_scope(sessions) as session:
        row = session.scalars(select(OwnLabelFit)).one()
        return row.key, {name: entry["examples"] for name, entry in row.labels.items()}, row.fitted_at


def test_a_labelling_job_reads_the_memory_once_for_the_kind_and_the_own_labels(sessions, github):
    confirmed_history(sessions)
    with statements(sessions) as first:
        streaming_issue(sessions, github, 1)  # nothing stored yet: fitted on the rows read for the kind
    with statements(sessions) as second:
        streaming_issue(sessions, github, 2)
    # the first job also computes the kinds' thresholds, nothing being stored yet (core.repository_thresholds
    # reads the memory for them once, as the labelling job reads it); the own labels' fit uses the rows read
    # for the kind: no third read
    assert len(memory_reads(first)) == 2
    assert len(memory_reads(second)) == 1
    assert own_decisions(sessions, 2) == [("streaming", "applied", None)]


def test_the_labelling_job_reads_the_stored_rules_and_the_feedback_refresh_refits_them(sessions, github):
    confirmed_history(sessions)
    streaming_issue(sessions, github, 1)  # the first job with own labels fits and stores them
    key, examples, fitted_at = stored_fit(sessions)
    history = own_labels.DEFAULT_MIN_EXAMPLES + 1  # examples of each in confirmed_history
    assert examples == {"streaming": history, "vision": history}
    record(sessions, issue_event("labeled", 1, labels=["bug", "streaming"], label="streaming"))  # one more
    with session_scope(sessions) as session:  # it embeds the issue, as the feedback job does with a model
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == 1)).one()
        memory.remember(session, issue, "bug", ENCODER.version, ENCODER.embed([issue.title])[0])
    streaming_issue(sessions, github, 2)
    assert stored_fit(sessions) == (key, examples, fitted_at)  # read as stored: no fit on the labelling path
    with session_scope(sessions) as session:  # the feedback queue's refresh (bot.decisions.act.refresh_after_decision)
        repository = store.find_repository(session, full_name=REPO)
        own_labels.refresh_stored(session, repository.id, ENCODER.version)
    moved_key, moved, _ = stored_fit(sessions)
    assert moved == {"streaming": history + 1, "vision": history} and moved_key != key


def test_the_stored_rules_are_what_the_decision_applies(sessions, github):
    """The heads read the issue's text as the model did; the decision stored is the stored rules' score and
    threshold."""
    confirmed_history(sessions)
    streaming_issue(sessions, github, 1)
    with session_scope(sessions) as session:
        rules = decode(session.scalars(select(OwnLabelFit)).one())
        repository = store.find_repository(session, full_name=REPO)
        stored = session.scalars(select(IssueRecord).where(IssueRecord.number == 1)).one()
        mem = own_labels.recall(session, repository.id, ENCODER.version, exclude_issue=stored.id)
        prediction = store.latest_prediction(session, stored)
        (row,) = prediction.own_labels
        assert rules.words is not None
        (scored,) = rules.score(ENCODER.embed(["Stream stops with a crash"])[0], ["streaming"], mem,
                                text="Stream stops with a crash")
        assert (row.label, row.score, row.threshold) == ("streaming", scored.score, scored.threshold)


def test_the_kind_is_decided_the_same_with_own_labels_on_or_off(sessions, github):
    confirmed_history(sessions)
    streaming_issue(sessions, github, 1, config="areas: false\n")
    streaming_issue(sessions, github, 2, config="areas: true\n")
    with session_scope(sessions) as session:
        plans = [store.latest_prediction(session, issue)
                 for issue in session.scalars(select(IssueRecord).where(IssueRecord.number.in_((1, 2)))
                                              .order_by(IssueRecord.number))]
        off, on = [(p.predicted, p.label, p.outcome, dict(p.scores)) for p in plans]
        assert [row.label for row in plans[1].own_labels] == ["streaming"] and plans[0].own_labels == []
    assert off == on


@pytest.mark.parametrize("mode", ["label", "suggest"])
def test_a_label_the_rules_serve_is_applied_only_where_the_mode_writes(mode):
    """decide() on plain inputs: the rules' threshold, not the vote's, applies a served label."""
    import numpy as np

    from bot.github_api.issues import IssueSnapshot

    vectors = np.array([[1.0, 0.0]] * 8 + [[0.0, 1.0]] * 8, dtype=np.float32)
    mem = own_labels.OwnLabelMemory(vectors, [frozenset({"streaming"})] * 8 + [frozenset()] * 8, {"streaming": 8},
                                    texts=["the stream stops"] * 8 + ["a question"] * 8)
    rules = fit_rules(mem, min_examples=5, target=0.85)
    inputs = labeling.LabelingInputs(
        REPO, 1, IssueSnapshot(1, "the stream stops", "", "open", (), False, None, None),
        dataclasses.replace(labeling.LabelingPolicy(), areas=None, mode=mode,
                            write_own_labels=True), ["bug"], scores={"bug": 0.9},
        vector=[1.0, 0.0], repo_labels=["bug", "streaming"], own_memory=mem, own_rules=rules)
    (decision,) = labeling.decide(inputs).own
    assert decision.threshold == rules.thresholds["streaming"]
    assert decision.outcome == ("applied" if mode == "label" else "suggested")


class RecordingRules:
    """Own-label rules that record the names an issue is scored on, and score none."""

    def __init__(self):
        self.scored: list[str] = []

    def score(self, vector, names, memory=None, *, text=None, examples=None):
        self.scored.extend(names)
        return []


@pytest.mark.parametrize("areas", [None, ("area-",)])
def test_an_issue_is_scored_on_at_most_max_own_labels_of_the_repositorys_labels(areas):
    """A repository with thousands of labels the areas take cost a shared worker a score per label on every
    issue: the first MAX_OWN_LABELS of them, in the repository's order, are scored."""
    from bot.github_api.issues import IssueSnapshot
    from core.own_labels.candidates import MAX_OWN_LABELS

    labels = [f"area-{n}" for n in range(5 * MAX_OWN_LABELS)]
    rules = RecordingRules()
    inputs = labeling.LabelingInputs(
        REPO, 1, IssueSnapshot(1, "the stream stops", "", "open", (), False, None, None),
        dataclasses.replace(labeling.LabelingPolicy(), areas=areas, write_own_labels=True), ["bug"],
        scores={"bug": 0.9}, vector=[1.0, 0.0], repo_labels=["bug", *labels],
        own_memory=own_labels.OwnLabelMemory(np.zeros((0, 2), dtype=np.float32), [], {}), own_rules=rules)
    labeling.decide(inputs)
    assert rules.scored == labels[:MAX_OWN_LABELS]
