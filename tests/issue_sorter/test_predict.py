"""`issue-sorter predict`: the App's answer on one issue without GitHub, as the labelling worker would decide it:
compared with the worker's own job on the same repository (its memory, config and labels), and nothing stored."""

from __future__ import annotations

import io
import json

import pytest
from sqlalchemy import func, select

from bot.labeling.config import CONFIG_PATH
from bot.labeling.what_if import OfflineRepository, what_if
from core import memory, store
from core.db import make_sessionmaker, session_scope
from core.issue_text import format_issue_text
from core.migrate import upgrade
from core.tables import IssueRecord, Prediction
from issue_sorter.cli import main
from issue_sorter.predict import read_issue
from tests.bot.rules import LABELS, REPO, SETTINGS, repository, run_job
from tests.fakes import FakeEncoder
from tests.tiny_model import promote_model

ENCODER = FakeEncoder({"crash": "bug", "please add": "feature"}, version="fake-1")
TITLE, BODY = "Crash when saving a file", "Traceback (most recent call last): TypeError"
CONFIG = "mode: comment\nthreshold: 0.3\nareas: false\n"


def with_memory(sessions, encoder) -> None:
    """Six confirmed issues in REPO's memory, one of them the issue's twin."""
    with session_scope(sessions) as session:
        stored = store.ensure_repository(session, REPO)
        for number, (title, label) in enumerate([(TITLE, "enhancement"), ("Please add tabs", "enhancement"),
                                                 ("Crash on load", "bug"), ("Docs typo", "documentation"),
                                                 ("Please add a flag", "enhancement"), ("Crash again", "bug")],
                                                start=100):
            row, _ = store.upsert_issue(session, stored, number, title=title, body="", author_login="a", state="closed")
            row.confirmed_label, row.confirmed_by = label, "backfill"
            session.flush()
            text = format_issue_text(TITLE, BODY) if number == 100 else title
            memory.remember(session, row, label, encoder.version, encoder.embed([text])[0],
                            scores=encoder.predict([text])[0])


def counts(sessions) -> tuple[int, int]:
    with session_scope(sessions) as session:
        return (session.scalar(select(func.count(IssueRecord.id))), session.scalar(select(func.count(Prediction.id))))


def test_the_answer_is_the_workers_decision_on_the_same_repository_and_nothing_is_stored(sessions):
    with_memory(sessions, ENCODER)
    before = counts(sessions)
    with session_scope(sessions) as session:
        answer = what_if(session, REPO, TITLE, BODY, ENCODER, SETTINGS,
                         OfflineRepository(REPO, CONFIG.encode(), LABELS))
    assert counts(sessions) == before  # the issue, its prediction and its thresholds were rolled back

    github = repository(files={(REPO, CONFIG_PATH): CONFIG})
    job = run_job(sessions, github, 1, classifier=ENCODER, title=TITLE, body=BODY)
    plan = answer.plan
    assert (plan.outcome, plan.label, plan.threshold) == (job.outcome, job.label, job.threshold) == (
        "applied", job.label, 0.3)
    assert plan.scores == pytest.approx(job.scores) and plan.model_scores == pytest.approx(job.model_scores)
    assert [voter["number"] for voter in plan.neighbours] == [voter["number"] for voter in job.neighbours]
    assert plan.neighbours[0]["number"] == 100  # the twin voted first
    worker_writes = [(call[0], call[3] if call[0] == "add_labels" else None) for call in github.writes()]
    assert [(write.call, tuple(write.args[2]) if write.call == "add_labels" else None)
            for write in plan.writes] == worker_writes


def test_without_a_repository_the_global_model_answers_with_no_memory(sessions):
    with session_scope(sessions) as session:
        answer = what_if(session, "-/-", "Please add dark mode", "", ENCODER, SETTINGS,
                         OfflineRepository("-/-", None, LABELS))
    assert (answer.plan.outcome, answer.plan.predicted, answer.plan.label) == ("applied", "feature", "enhancement")
    assert answer.plan.neighbours is None or answer.plan.neighbours == ()


@pytest.mark.parametrize("title,body,stdin,expected", [
    ("Crash", "", "", ("Crash", "")),
    ("Crash", "-", "line one\nline two\n", ("Crash", "line one\nline two")),
    ("-", "", "Crash on save\n\nTraceback ...\n", ("Crash on save", "Traceback ...")),
])
def test_dash_reads_the_issue_or_its_body_from_stdin(title, body, stdin, expected):
    assert read_issue(title, body, io.StringIO(stdin)) == expected


@pytest.mark.slow
def test_the_command_answers_with_the_promoted_model_as_the_worker_does(settings, tiny_model_dir, capsys,
                                                                        monkeypatch):
    from core.classifier import load_classifier

    upgrade(settings.database_url)
    sessions = make_sessionmaker(settings.database_url)
    promote_model(settings.database_url, settings.model_dir, tiny_model_dir)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{TITLE}\n{BODY}\n"))
    assert main(["predict", "-", "--json", "--labels", ",".join(LABELS)], load=lambda **_: settings) == 0
    report = json.loads(capsys.readouterr().out)
    with session_scope(sessions) as session:
        serving = store.serving_model_for(session, REPO)
    classifier = load_classifier(serving.path, threads=settings.worker_threads, engine=settings.engine)
    job = run_job(sessions, repository(), 1, classifier=classifier, settings=settings, title=TITLE, body=BODY)
    assert (report["outcome"], report["kind"], report["label"]) == (job.outcome, job.predicted, job.label)
    assert report["scores"] == pytest.approx(job.scores, abs=1e-5) and report["threshold"] == job.threshold
    assert report["model"] == serving.version and report["similar"] == []
    main(["predict", TITLE, BODY, "--labels", ",".join(LABELS)], load=lambda **_: settings)
    text = capsys.readouterr().out
    assert f"{job.outcome}: kind {job.predicted}" in text and "threshold in force: " in text
