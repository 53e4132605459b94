"""Lifecycle: an installation or repository removed is purged (rows, models, their files), a suspended one
is frozen, `issue-sorter purge` does the same for operators, and unconfirmed text has a retention."""

import dataclasses
import datetime as dt
import logging
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bot.lifecycle import repositories as lifecycle
from core import store
from core.db import make_sessionmaker, session_scope
from core.migrate import upgrade
from core.tables import (
    Installation,
    IssueRecord,
    LabelEvent,
    ModelPromotion,
    ModelVersion,
    Prediction,
    Repository,
    TrainingRun,
)
from issue_sorter.cli import main
from tests.bot.conftest import INSTALLATION, REPO, deliver, issue_payload, run_worker

OTHER = "someone/else"  # another installation's repository: never touched
SECRET = "zanzibar-quokka-7731"  # issue text that must not survive a purge


def populate(sessions, model_dir, repo: str, installation: int, github_id: int) -> str:
    """A repository with an issue, a prediction, a label event and a promoted model on disk."""
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, repo, installation, github_id=github_id, private=True)
        issue, _ = store.upsert_issue(session, repository, 1, title=f"Crash {SECRET}", body=SECRET, author_login="a",
                                      state="open")
        issue.confirmed_label = "bug"
        directory = model_dir / f"{repo.replace('/', '-')}-v1"
        directory.mkdir(parents=True)
        (directory / "pipeline.joblib").write_text(SECRET)
        version = ModelVersion(version=directory.name, scope=repo, path=str(directory), labels=["bug", "feature"])
        session.add(version)
        session.flush()
        session.add_all([
            Prediction(issue_id=issue.id, model_version_id=version.id, scores={"bug": 1.0}, predicted="bug",
                       label="bug", applied=True, outcome="applied"),
            LabelEvent(issue_id=issue.id, action="labeled", label="bug", actor_login="m"),
            ModelPromotion(scope=repo, model_version_id=version.id, reason="test"),
            TrainingRun(scope=repo, challenger_version_id=version.id, status="finished")])
        return str(directory)


def counts(sessions, repo: str) -> dict[str, int]:
    with session_scope(sessions) as session:
        repository = store.find_repository(session, full_name=repo)
        issue_ids = select(IssueRecord.id).join(Repository).where(Repository.full_name == repo)
        return {"repository": int(repository is not None),
                "issues": session.scalar(select(func.count()).select_from(IssueRecord).where(
                    IssueRecord.id.in_(issue_ids))),
                "predictions": session.scalar(select(func.count()).select_from(Prediction).where(
                    Prediction.issue_id.in_(issue_ids))),
                "label_events": session.scalar(select(func.count()).select_from(LabelEvent).where(
                    LabelEvent.issue_id.in_(issue_ids))),
                "models": session.scalar(select(func.count()).select_from(ModelVersion).where(
                    ModelVersion.scope == repo)),
                "promotions": session.scalar(select(func.count()).select_from(ModelPromotion).where(
                    ModelPromotion.scope == repo)),
                "runs": session.scalar(select(func.count()).select_from(TrainingRun).where(
                    TrainingRun.scope == repo))}


GONE = {"repository": 0, "issues": 0, "predictions": 0, "label_events": 0, "models": 0, "promotions": 0, "runs": 0}
KEPT = {"repository": 1, "issues": 1, "predictions": 1, "label_events": 1, "models": 1, "promotions": 1, "runs": 1}


def installation_payload(payload, name: str, installation: int = INSTALLATION) -> dict:
    data = payload(name)
    data["installation"]["id"] = installation
    return data


@pytest.mark.redis
def test_an_installation_deleted_is_purged_with_its_model_files_and_nothing_of_others(
        bare_context, client, payload, redis, caplog, fake_github):
    sessions, model_dir = bare_context.sessionmaker, bare_context.settings.model_dir
    ours, theirs = (populate(sessions, model_dir, REPO, INSTALLATION, 11), populate(sessions, model_dir, OTHER, 2, 22))
    fake_github.set_installation(INSTALLATION, deleted=True)  # GitHub uninstalled the App, then told us
    with caplog.at_level(logging.INFO):
        assert deliver(client, "installation", installation_payload(payload, "installation/deleted"),
                       "d-uninstall").status_code == 202
        run_worker(redis)
    assert counts(sessions, REPO) == GONE and counts(sessions, OTHER) == KEPT
    assert not Path(ours).exists() and Path(theirs).exists()
    with session_scope(sessions) as session:
        assert session.get(Installation, INSTALLATION).removed_at is not None
    assert "purged repository" in caplog.text and SECRET not in caplog.text


def copy_in_redis(redis, repo: str, github_id: int) -> set[bytes]:
    """What the App keeps of a repository in Redis, as its caches write it: the keys."""
    from bot.decisions import memory_fill
    from bot.github_api import cache
    from bot.labeling import backtest, comments
    from bot.lifecycle import preview
    from core import visibility

    keys = [cache.FILE_KEY.format(repo.lower(), ".github/issue-sorter.yml"), cache.LABELS_KEY.format(repo.lower()),
            cache.GENERATION_KEY.format(repo.lower()), cache.PERMISSION_KEY.format(repo.lower(), "octocat"),
            preview.REPORTS.key.format(repo), backtest.REPORTS.key.format(repo),
            comments.CONFIG_WARNED_KEY.format(repo, "abc"), memory_fill.SERVED_KEY.format(repo=repo, version="v1"),
            memory_fill.WAITING_KEY.format(repo=repo, version="v1"), visibility.KEY.format(github_id)]
    for key in keys:
        redis.set(key, SECRET, ex=7 * 86400)
    return {key.encode() for key in keys}


@pytest.mark.redis
def test_a_purge_leaves_nothing_of_the_repository_in_redis_and_keeps_other_repositories_copies(
        bare_context, client, payload, redis, fake_github):
    """A purge deleted the rows and the models, and left the config file's content, previews and
    caches in Redis for days."""
    sessions, model_dir = bare_context.sessionmaker, bare_context.settings.model_dir
    populate(sessions, model_dir, REPO, INSTALLATION, 11)
    populate(sessions, model_dir, OTHER, 2, 22)
    copy_in_redis(redis, REPO, 11)
    theirs = copy_in_redis(redis, OTHER, 22) | copy_in_redis(redis, REPO + "-2", 33)  # a name it begins
    fake_github.set_installation(INSTALLATION, deleted=True)
    deliver(client, "installation", installation_payload(payload, "installation/deleted"), "d-uninstall")
    run_worker(redis)
    left = {key for key in redis.scan_iter(_type="string") if redis.get(key) == SECRET.encode()}
    assert left == theirs


@pytest.mark.redis
def test_a_repository_removed_from_the_installation_is_purged_alone(bare_context, client, payload, redis,
                                                                   fake_github):
    sessions, model_dir = bare_context.sessionmaker, bare_context.settings.model_dir
    fake_github.set_installation(INSTALLATION, removed=[REPO])
    populate(sessions, model_dir, REPO, INSTALLATION, 11)
    populate(sessions, model_dir, "Codertocat/Kept", INSTALLATION, 12)
    removed = installation_payload(payload, "installation_repositories/removed")
    removed["repositories_removed"] = [{"id": 11, "full_name": REPO, "name": "Hello-World", "private": True}]
    deliver(client, "installation_repositories", removed, "d-removed")
    run_worker(redis)
    assert counts(sessions, REPO) == GONE and counts(sessions, "Codertocat/Kept") == KEPT


@pytest.mark.redis
@pytest.mark.slow
def test_a_suspended_installation_is_frozen_and_labels_again_once_unsuspended(worker_context, fake_github, client,
                                                                               payload, redis):
    fake_github.set_installation(INSTALLATION, suspended=True)
    deliver(client, "installation", installation_payload(payload, "installation/suspend"), "d-suspend")
    run_worker(redis)
    fake_github.add_issue(REPO, 1, "App crashes with TypeError when saving", "Traceback: TypeError ...")
    deliver(client, "issues", issue_payload(payload, "opened", 1, title="App crashes with TypeError when saving",
                                            body="Traceback: TypeError ..."), "d-frozen")
    run_worker(redis)
    assert fake_github.issue_labels(REPO, 1) == []
    with session_scope(worker_context.sessionmaker) as session:
        assert session.get(Installation, INSTALLATION).suspended_at is not None
        assert session.scalar(select(func.count()).select_from(Prediction)) == 0

    fake_github.set_installation(INSTALLATION, suspended=False)
    deliver(client, "installation", installation_payload(payload, "installation/unsuspend"), "d-unsuspend")
    run_worker(redis)
    fake_github.add_issue(REPO, 2, "App crashes with TypeError when loading", "Traceback: TypeError ...")
    deliver(client, "issues", issue_payload(payload, "opened", 2, title="App crashes with TypeError when loading",
                                            body="Traceback: TypeError ..."), "d-thawed")
    run_worker(redis)
    assert len(fake_github.issue_labels(REPO, 2)) == 1


@pytest.mark.postgres
def test_purge_command_on_postgres_removes_a_repositorys_rows_and_model_files(postgres_url, settings, capsys,
                                                                             caplog):
    upgrade(postgres_url)
    sessions = make_sessionmaker(postgres_url)
    settings = dataclasses.replace(settings, database_url=postgres_url)
    ours = populate(sessions, settings.model_dir, REPO, INSTALLATION, 11)
    theirs = populate(sessions, settings.model_dir, OTHER, 2, 22)
    with caplog.at_level(logging.INFO):
        assert main(["purge", REPO], load=lambda **_: settings) == 0
    assert "purged 1 repositories: 1 issues, 1 predictions, 1 label events, 1 model versions" in capsys.readouterr().out
    assert counts(sessions, REPO) == GONE and counts(sessions, OTHER) == KEPT
    assert not Path(ours).exists() and Path(theirs).exists()
    assert SECRET not in caplog.text
    with pytest.raises(SystemExit, match="nothing was deleted"):
        main(["purge", "nobody/nothing"], load=lambda **_: settings)
    sessions.kw["bind"].dispose()


def test_unconfirmed_issue_text_is_cleared_after_the_retention_and_confirmed_text_is_kept(sessions):
    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, REPO, github_id=11)
        for number, age, label in ((1, 40, None), (2, 40, "bug"), (3, 5, None)):
            store.upsert_issue(session, repository, number, title=f"title {number}", body="body", author_login="a",
                               state="open", event_at=now - dt.timedelta(days=age))[0].confirmed_label = label
    with session_scope(sessions) as session:
        assert lifecycle.clear_unconfirmed(session, older_than_days=30, now=now) == 1
    with session_scope(sessions) as session:
        texts = {i.number: (i.title, i.body) for i in session.scalars(select(IssueRecord))}
    assert texts == {1: ("", ""), 2: ("title 2", "body"), 3: ("title 3", "body")}
