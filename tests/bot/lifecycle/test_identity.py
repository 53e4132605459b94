"""Identity and order: a repository is GitHub's id, its history and model follow renames and transfers,
and an older event never overwrites newer state (signed delivery → Redis → RQ worker → database)."""

import datetime as dt

import pytest
from sqlalchemy import select

from core import store
from core.db import session_scope
from core.tables import IssueRecord, LabelEvent, ModelPromotion, ModelVersion, Prediction, Repository
from tests.bot.conftest import INSTALLATION, REPO, deliver, issue_payload, run_worker

pytestmark = pytest.mark.redis
REPO_ID = 186853002  # Codertocat/Hello-World in the issues examples


def own_model(session, scope: str, version: str) -> None:
    """A promoted model of `scope` (rows only: serving_model_for reads the registry's rows)."""
    row = ModelVersion(version=version, scope=scope, path=f"/models/{version}", labels=["bug", "feature"])
    session.add(row)
    session.flush()
    session.add(ModelPromotion(scope=scope, model_version_id=row.id, reason="test"))


def known_repository(bare_context, *, confirmed: int = 2):
    """REPO by its id, with confirmed issues, a prediction and a model of its own."""
    with session_scope(bare_context.sessionmaker) as session:
        repository = store.ensure_repository(session, REPO, INSTALLATION, github_id=REPO_ID, private=False)
        for number in range(1, confirmed + 1):
            issue, _ = store.upsert_issue(session, repository, number, title=f"Crash {number}", body="trace",
                                          author_login="a", state="open")
            issue.confirmed_label = "bug"
        session.flush()
        session.add(Prediction(issue_id=issue.id, scores={"bug": 0.9}, predicted="bug", label="bug",
                               applied=True, outcome="applied"))
        own_model(session, REPO, "hello-own")


def renamed(payload, new_name: str, repo_id: int = REPO_ID, action: str = "renamed") -> dict:
    data = payload(f"repository/{action}.with-installation" if action == "transferred" else "repository/renamed")
    data["repository"].update(id=repo_id, full_name=new_name, name=new_name.split("/")[1], private=False)
    data["installation"] = {"id": INSTALLATION}
    return data


def serving(ctx, repo: str) -> str | None:
    with session_scope(ctx.sessionmaker) as session:
        version = store.serving_model_for(session, repo)
        return version.version if version else None


@pytest.mark.parametrize("action,new_name", [("renamed", "Codertocat/Hello-Universe"),
                                             ("transferred", "Octocoders/Hello-World")])
def test_a_renamed_or_transferred_repository_keeps_its_history_and_its_model(bare_context, client, payload, redis,
                                                                              action, new_name):
    known_repository(bare_context)
    assert deliver(client, "repository", renamed(payload, new_name, action=action), "d-rename").status_code == 202
    run_worker(redis)

    with session_scope(bare_context.sessionmaker) as session:
        (repository,) = session.scalars(select(Repository)).all()
        assert (repository.full_name, repository.github_id) == (new_name, REPO_ID)
        assert session.query(IssueRecord).filter_by(repository_id=repository.id).count() == 2
        assert session.scalars(select(Prediction)).one().issue.repository_id == repository.id
    assert serving(bare_context, new_name) == "hello-own"  # the model moved with it
    assert serving(bare_context, REPO) is None  # nothing serves the old name (no global model here)


def test_a_reused_name_starts_from_nothing_instead_of_inheriting_another_repositorys_history(
        bare_context, client, payload, redis):
    """REPO was renamed while we heard nothing; a new repository (another id) now has its name."""
    known_repository(bare_context)
    labeled = issue_payload(payload, "labeled", 9, labels=["bug"], label="bug", sender="maintainer")
    labeled["repository"]["id"] = 777
    deliver(client, "issues", labeled, "d-new")
    run_worker(redis)

    with session_scope(bare_context.sessionmaker) as session:
        new = store.find_repository(session, github_id=777)
        old = store.find_repository(session, github_id=REPO_ID)
        assert new.full_name == REPO and old.full_name == f"repo:{REPO_ID}"
        assert [i.number for i in session.scalars(select(IssueRecord).where(IssueRecord.repository_id == new.id))] \
            == [9]
    assert serving(bare_context, REPO) is None  # the old repository's model does not serve the new one
    assert serving(bare_context, f"repo:{REPO_ID}") == "hello-own"
    # when the old repository is heard of again, under its new name, the model follows it there
    deliver(client, "repository", renamed(payload, "Codertocat/Hello-Again"), "d-again")
    run_worker(redis)
    assert serving(bare_context, "Codertocat/Hello-Again") == "hello-own"


def transferred(payload, new_repo: str, new_repo_id: int, new_number: int) -> dict:
    data = payload("issues/transferred")
    data["repository"].update(id=REPO_ID, full_name=REPO, private=False)
    data["installation"] = {"id": INSTALLATION}
    data["issue"]["number"] = 2
    data["changes"]["new_repository"].update(id=new_repo_id, full_name=new_repo, private=True)
    data["changes"]["new_issue"]["number"] = new_number
    return data


def test_a_transferred_issue_moves_with_its_prediction_decision_and_label_events(bare_context, client, payload,
                                                                                  redis):
    known_repository(bare_context)
    deliver(client, "issues", transferred(payload, "Codertocat/Other", 5151, 7), "d-transfer")
    run_worker(redis)

    with session_scope(bare_context.sessionmaker) as session:
        target = store.find_repository(session, github_id=5151)
        assert (target.full_name, target.installation_id, target.private) == ("Codertocat/Other", INSTALLATION, True)
        moved = session.scalars(select(IssueRecord).where(IssueRecord.repository_id == target.id)).one()
        assert (moved.number, moved.confirmed_label) == (7, "bug")
        assert session.scalars(select(Prediction)).one().issue_id == moved.id
        assert session.scalars(select(LabelEvent)).one().issue_id == moved.id
        source = store.find_repository(session, github_id=REPO_ID)
        assert [i.number for i in session.scalars(select(IssueRecord).where(
            IssueRecord.repository_id == source.id))] == [1]


def test_an_issue_transferred_out_of_the_installation_keeps_nothing_here(bare_context, client, payload, redis):
    known_repository(bare_context)
    deliver(client, "issues", transferred(payload, "someone-else/elsewhere", 6161, 3), "d-away")
    run_worker(redis)
    with session_scope(bare_context.sessionmaker) as session:
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == 2)).one()
        assert (issue.title, issue.body, issue.confirmed_label, issue.state) == ("", "", None, "transferred")
        assert store.find_repository(session, github_id=6161) is None


def at(payload_data: dict, moment: dt.datetime) -> dict:
    payload_data["issue"]["updated_at"] = moment.isoformat()
    return payload_data


T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def stored(ctx, number: int) -> IssueRecord:
    with session_scope(ctx.sessionmaker) as session:
        return session.scalars(select(IssueRecord).where(IssueRecord.number == number)).one()


def test_a_late_edit_after_deletion_never_writes_the_text_back(bare_context, client, payload, redis):
    """GitHub does not keep delivery order: the edit (made before the deletion) arrives after it."""
    deliver(client, "issues", at(issue_payload(payload, "deleted", 4, title="secret", body="token"),
                                 T0 + dt.timedelta(minutes=2)), "d-del")
    run_worker(redis)
    for delivery, moment in (("d-late-edit", T0 + dt.timedelta(minutes=1)), ("d-later", T0 + dt.timedelta(hours=1))):
        edit = at(issue_payload(payload, "edited", 4, title="secret", body="token again"), moment)
        deliver(client, "issues", edit, delivery)
        run_worker(redis)
    issue = stored(bare_context, 4)
    assert (issue.title, issue.body, issue.state) == ("", "", "deleted")


def test_an_older_edit_never_overwrites_a_newer_one(bare_context, client, payload, redis):
    deliver(client, "issues", at(issue_payload(payload, "edited", 5, title="Crash", body="newest"),
                                 T0 + dt.timedelta(minutes=5)), "d-new-edit")
    deliver(client, "issues", at(issue_payload(payload, "edited", 5, title="Crash", body="older"),
                                 T0 + dt.timedelta(minutes=1)), "d-old-edit")
    run_worker(redis)
    issue = stored(bare_context, 5)
    assert issue.body == "newest" and store.as_utc(issue.last_event_at) == T0 + dt.timedelta(minutes=5)
    deliver(client, "issues", at(issue_payload(payload, "edited", 5, title="Crash", body="newer still"),
                                 T0 + dt.timedelta(minutes=6)), "d-newer")
    run_worker(redis)
    assert stored(bare_context, 5).body == "newer still"
