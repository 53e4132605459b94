"""Installation and repository events are checked with GitHub before they act: the signature covers only
the body, and the body's replay marker lasts 3 days, so a captured `installation_repositories.removed`
sent again later purged a repository, and `repository.publicized` made a private one feed shared models.
Signed delivery → Redis → RQ worker → the fake GitHub over HTTP → the database."""

from __future__ import annotations

import pytest

from core import store
from core.db import session_scope
from core.tables import Installation
from tests.bot.conftest import INSTALLATION, REPO, deliver, run_worker
from tests.bot.lifecycle.test_repositories import GONE, KEPT, counts, installation_payload, populate

pytestmark = pytest.mark.redis


def _removed(payload, repo_id: int) -> dict:
    data = installation_payload(payload, "installation_repositories/removed")
    data["repositories_removed"] = [{"id": repo_id, "full_name": REPO, "name": "Hello-World", "private": True}]
    return data


def _visibility(payload, action: str, repo_id: int) -> dict:
    data = payload(f"repository/{action}")
    data["repository"].update(id=repo_id, full_name=REPO, name="Hello-World", private=action == "privatized")
    data["installation"] = {"id": INSTALLATION}
    return data


def _private(sessions, repo_id: int) -> bool:
    with session_scope(sessions) as session:
        return store.find_repository(session, github_id=repo_id).private


def test_a_replayed_removal_of_a_repository_still_installed_purges_nothing(bare_context, client, payload,
                                                                           redis, fake_github):
    sessions = bare_context.sessionmaker
    populate(sessions, bare_context.settings.model_dir, REPO, INSTALLATION, 11)
    assert deliver(client, "installation_repositories", _removed(payload, 11), "d-replayed").status_code == 202
    run_worker(redis)
    assert counts(sessions, REPO) == KEPT
    fake_github.set_installation(INSTALLATION, removed=[REPO])  # now it really is removed
    deliver(client, "installation_repositories", _removed(payload, 11) | {"real": True}, "d-real")
    run_worker(redis)
    assert counts(sessions, REPO) == GONE


def test_a_replayed_uninstall_of_a_live_installation_purges_nothing(bare_context, client, payload, redis):
    sessions = bare_context.sessionmaker
    populate(sessions, bare_context.settings.model_dir, REPO, INSTALLATION, 11)
    deliver(client, "installation", installation_payload(payload, "installation/deleted"), "d-replayed")
    run_worker(redis)
    assert counts(sessions, REPO) == KEPT
    with session_scope(sessions) as session:
        assert session.get(Installation, INSTALLATION).removed_at is None


def test_a_replayed_suspension_of_an_active_installation_freezes_nothing(bare_context, client, payload, redis):
    deliver(client, "installation", installation_payload(payload, "installation/suspend"), "d-replayed")
    run_worker(redis)
    with session_scope(bare_context.sessionmaker) as session:
        installation = session.get(Installation, INSTALLATION)
        assert installation is None or installation.suspended_at is None


def test_a_replayed_publicized_leaves_a_private_repository_private(bare_context, client, payload, redis,
                                                                   fake_github):
    repo_id, sessions = fake_github.repo_id(REPO), bare_context.sessionmaker
    with session_scope(sessions) as session:
        store.ensure_repository(session, REPO, INSTALLATION, github_id=repo_id, private=True)
    fake_github.set_private(REPO, True)
    deliver(client, "repository", _visibility(payload, "publicized", repo_id), "d-replayed")
    run_worker(redis)
    assert _private(sessions, repo_id) is True
    fake_github.set_private(REPO, False)  # the owner really made it public
    deliver(client, "repository", _visibility(payload, "publicized", repo_id) | {"real": True}, "d-real")
    run_worker(redis)
    assert _private(sessions, repo_id) is False


def test_a_visibility_event_for_a_repository_github_does_not_show_changes_nothing(bare_context, client,
                                                                                  payload, redis):
    sessions = bare_context.sessionmaker
    with session_scope(sessions) as session:
        store.ensure_repository(session, REPO, INSTALLATION, github_id=4242, private=True)
    deliver(client, "repository", _visibility(payload, "publicized", 4242), "d-other-id")  # not REPO's id
    run_worker(redis)
    assert _private(sessions, 4242) is True
