"""The backtest's replay on the fakes (tests/fakes.py): what it reads, what it counts, and that it writes
nothing to GitHub or the service's database. Its figures against the replay's: test_backtest_replay.py."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, select

from bot.github_api.issues import IssueSnapshot
from bot.labeling.backtest import Precomputed, Remembering, Replay, backtest, labelled_history, stored_history
from bot.labeling.config import CONFIG_PATH
from bot.lifecycle import backfill
from core import own_labels, store
from core.db import make_sessionmaker, session_scope
from core.settings import Settings
from core.tables import Base, IssueRecord, MemoryEntry, ModelPromotion, ModelVersion
from tests.bot.rules import REPO, repository
from tests.fakes import FakeEncoder

ENCODER = FakeEncoder({"crash": "bug", "please add": "feature", "how do i": "question"},
                      labels=("bug", "feature", "question", "docs"))
SETTINGS = Settings(webhook_secret="s", threshold=0.5)
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
TEXTS = {"bug": "Crash when saving {}", "enhancement": "Please add {}", "question": "How do I use {}?",
         "documentation": "Typo in the docs of {}"}


def issue(number: int, label: str, *extra: str, title: str | None = None) -> IssueSnapshot:
    return IssueSnapshot(number, title or TEXTS[label].format(number), "", "closed", (label, *extra), False, "someone",
                         START + dt.timedelta(days=number))


HISTORY = [issue(n, ("bug", "enhancement", "question", "documentation")[n % 4]) for n in range(1, 41)]


def run(issues=HISTORY, config: str | None = None, **options) -> tuple[dict, object]:
    github = repository(files={(REPO, CONFIG_PATH): config} if config is not None else {})
    return backtest(issues, repo=REPO, classifier=ENCODER, settings=SETTINGS, github=Remembering(github),
                    **options), github


def test_it_writes_nothing_to_github_or_to_the_services_database(sessions):
    report, github = run()
    assert github.writes() == []
    with session_scope(sessions) as session:
        assert session.scalar(select(func.count(IssueRecord.id))) == 0
    assert [call[1] for call in github.calls if call[0] == "get_file"] == [REPO, "octo/.github"]  # once each
    assert report["issues"] == len(HISTORY) and report["history"] == 0


def test_the_report_counts_every_issue_once_and_its_shares_agree():
    report, _ = run(history=8, window=8)
    assert report["issues"] == 32 and sum(report["outcomes"].values()) == 32
    assert report["labelled"] == report["outcomes"].get("applied", 0)
    assert report["abstained"]["issues"] == 32 - report["labelled"]
    assert sum(report["abstained"]["by_kind"].values()) == report["abstained"]["issues"]
    assert report["coverage"] == report["labelled"] / 32
    per_kind = report["per_kind"]
    assert sum(row["labelled"] for row in per_kind.values()) == report["labelled"]  # every label has a kind
    assert sum(row["right"] for row in per_kind.values()) == report["right"]
    assert report["precision"] == report["right"] / report["labelled"]
    assert per_kind["bug"]["precision"] == 1.0  # the fake is sure of crashes, and crashes are bugs
    assert per_kind["docs"] == {"issues": 8, "labelled": 0, "right": 0, "precision": None, "recall": 0.0}
    assert [point["seen"] for point in report["curve"]] == [0, 8, 16, 24]
    assert set(report["thresholds"]) == set(ENCODER.labels)  # the target's per-kind thresholds, at the end
    assert report["config"]["target_precision"] == 0.9


def test_a_held_config_is_said_and_nothing_would_be_labelled():
    report, _ = run(config="allow: defect\n")
    assert report["config"]["held"].startswith(f"{REPO}/{CONFIG_PATH} is broken")
    assert report["outcomes"] == {"held": len(HISTORY)} and report["labelled"] == 0


def test_a_flat_threshold_of_zero_labels_every_issue():
    report, _ = run(config="threshold: 0.0\n")
    assert report["labelled"] == report["issues"] and report["abstained"]["issues"] == 0


def test_the_repositorys_own_labels_are_counted_on_the_issues_that_carry_them():
    issues = [issue(n, "bug", "area: ui") if n % 2 else issue(n, "enhancement") for n in range(1, 31)]
    report, _ = run(issues)
    row = report["own_labels"]["area: ui"]
    assert row["issues"] == 15 and row["applied"] <= 15 and row["right"] <= row["applied"]


def test_a_model_served_mid_replay_decides_the_issues_after_it_over_the_memory_it_embedded(tmp_path):
    """simulation.replay serves what its retraining promotes: from the next issue on, with the memory's fill."""
    later = FakeEncoder(dict(ENCODER.rules), labels=ENCODER.labels, version="fake-2")
    sessions = make_sessionmaker(f"sqlite:///{tmp_path / 'replay.db'}")
    Base.metadata.create_all(sessions.kw["bind"])
    with session_scope(sessions) as session:
        versions = [ModelVersion(version=model.version, path="", labels=model.labels) for model in (ENCODER, later)]
        session.add_all(versions)
        session.flush()
        session.add(ModelPromotion(model_version_id=versions[0].id, reason="the first"))
    replay = Replay(sessions, REPO, Precomputed.of(ENCODER, []), SETTINGS, Remembering(repository()))

    def after(done: int) -> None:
        if done == 16:
            with session_scope(sessions) as session:
                session.add(ModelPromotion(model_version_id=versions[1].id, reason="the gate's"))
            replay.serve(Precomputed.of(later, []))
            with session_scope(sessions) as session:  # each of the 8 history and 16 decided issues
                assert session.query(MemoryEntry).filter_by(model_version="fake-2").count() == 24

    report = replay.run(HISTORY, 8, window=8, after=after)
    assert [point["model"] for point in report["curve"]] == ["fake-1", "fake-1", "fake-2", "fake-2"]
    assert report["model"] == "fake-2" and report["issues"] == 32


def test_too_little_history_is_refused():
    with pytest.raises(ValueError, match="history must leave an issue"):
        run(history=len(HISTORY))


class Pages:
    """GitHub's list of issues, oldest first, a page at a time."""

    def __init__(self, issues):
        self.issues, self.pages = issues, []

    def list_issues_page(self, repo: str, page: int, per_page: int = 100) -> list[IssueSnapshot]:
        self.pages.append(page)
        return self.issues[(page - 1) * per_page:page * per_page]


def test_the_history_is_read_as_the_backfill_reads_it():
    pull = IssueSnapshot(500, "Fix crash", "", "closed", ("bug",), True, "x", START)
    unlabelled = IssueSnapshot(501, "Hello", "", "open", (), False, "x", START)
    duplicate = IssueSnapshot(502, "Crash", "", "closed", ("bug", "duplicate"), False, "x", START)
    listed = [*HISTORY[:150], pull, unlabelled, duplicate] + [issue(n, "bug") for n in range(600, 760)]
    pages = Pages(listed)
    found = labelled_history(pages, REPO, max_issues=120)
    assert [i.number for i in found] == [i.number for i in listed if backfill.is_history(i)][:120]
    assert {500, 501, 502}.isdisjoint(i.number for i in found) and pages.pages == [1, 2]


def test_the_history_the_backfill_stored_is_read_back_in_time_order_with_its_own_labels(sessions):
    with session_scope(sessions) as session:
        backfill.store_page(session, REPO, [issue(3, "bug", "area: ui"), issue(1, "question")], 10)
        stored = store.find_repository(session, full_name=REPO)
        later, _ = store.upsert_issue(session, stored, 9, title="Crash", body="", author_login="a", state="open")
        own_labels.confirm(session, later, "area: ui", "maintainer")  # confirmed later, not the backfill's
    with session_scope(sessions) as session:
        history = stored_history(session, REPO)
    assert [(i.number, i.labels) for i in history] == [(1, ("question",)), (3, ("bug", "area: ui"))]
