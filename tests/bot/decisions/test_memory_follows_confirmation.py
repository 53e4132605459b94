"""The memory row of an issue follows what is confirmed of it without embedding its text again: the feedback
job (bot.decisions.act, as bot.jobs runs it) relabels the row a kind change or removal leaves standing.
Before, a kind removed from an issue that keeps own labels dropped its row and embedded the same text once
more."""

from sqlalchemy import select

from core import memory
from core.db import session_scope
from core.tables import IssueRecord, MemoryEntry
from tests.bot.labeling.test_own_labels import ENCODER, event
from tests.bot.rules import record


def feedback_job(sessions, data: dict) -> None:
    """What bot.jobs._record_issue_event does with one event, the serving model as embedder."""
    record(sessions, data, embedder=ENCODER)


def row(sessions, number: int) -> tuple[str, bytes] | None:
    with session_scope(sessions) as session:
        found = session.execute(select(MemoryEntry.label, MemoryEntry.embedding).join(
            IssueRecord, IssueRecord.id == MemoryEntry.issue_id).where(IssueRecord.number == number)).all()
        assert len(found) <= 1
        return tuple(found[0]) if found else None


def test_a_kind_removed_from_an_issue_that_keeps_own_labels_is_relabelled_not_embedded_again(sessions):
    feedback_job(sessions, event("labeled", 1, labels=["streaming"], label="streaming", title="Stream stops"))
    feedback_job(sessions, event("labeled", 1, labels=["streaming", "bug"], label="bug", title="Stream stops"))
    label, vector = row(sessions, 1)
    assert label == "bug"
    embedded = len(ENCODER.embedded)
    feedback_job(sessions, event("unlabeled", 1, labels=["streaming"], label="bug", title="Stream stops"))
    assert row(sessions, 1) == (memory.NO_KIND, vector)  # the kind's vote no longer counts it, the own labels do
    assert len(ENCODER.embedded) == embedded


def test_a_kind_replaced_is_relabelled_and_a_kind_removed_with_nothing_left_drops_the_row(sessions):
    feedback_job(sessions, event("labeled", 2, labels=["bug"], label="bug", title="Crash on start"))
    label, vector = row(sessions, 2)
    assert label == "bug"
    embedded = len(ENCODER.embedded)
    feedback_job(sessions, event("labeled", 2, labels=["bug", "enhancement"], label="enhancement",
                                 title="Crash on start"))
    feedback_job(sessions, event("unlabeled", 2, labels=["enhancement"], label="bug", title="Crash on start"))
    assert row(sessions, 2) == ("enhancement", vector) and len(ENCODER.embedded) == embedded
    feedback_job(sessions, event("unlabeled", 2, labels=[], label="enhancement", title="Crash on start"))
    assert row(sessions, 2) is None
