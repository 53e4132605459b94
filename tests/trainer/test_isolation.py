"""Isolation on PostgreSQL: a private repository's issue text never reaches another installation's training
data or model files; public repositories are shared only where the operator allows it."""

import datetime as dt
import zlib
from pathlib import Path

import pytest
from sqlalchemy import select

from core import store
from core.db import make_sessionmaker, session_scope
from core.migrate import upgrade
from core.tables import GLOBAL_SCOPE, Installation, Repository
from core.visibility import PublicCheck
from simulation.fake_github import FakeGitHub
from trainer.baseline import train_tfidf, train_tfidf_borrowing
from trainer.retrain import RetrainPolicy, examples_for_scope, other_repositories_examples

pytestmark = pytest.mark.postgres
PRIVATE_TOKEN = "xylophonequagmire"  # appears only in alice/secret, a private repository of installation 100
PUBLIC_TOKEN = "zebracandelabra"  # appears only in alice/open, a public repository of installation 100
LABELS = ["bug", "feature"]
BUG = ("Crash with TypeError when saving {token}", "Traceback: TypeError in save() {token}")
FEATURE = ("Add a dark mode option {token}", "It would be great to have a dark theme {token}")


def confirmed(session, repo: str, installation: int | None, *, private: bool, token: str = "", n: int = 6) -> None:
    repository = store.ensure_repository(session, repo, installation, github_id=zlib.crc32(repo.encode()),
                                         private=private)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for number in range(1, n + 1):
        title, body = (BUG if number % 2 else FEATURE)
        issue, _ = store.upsert_issue(session, repository, number, title=title.format(token=token),
                                      body=body.format(token=token), author_login="a", state="open",
                                      opened_at=start + dt.timedelta(days=number))
        issue.confirmed_label = "bug" if number % 2 else "feature"


@pytest.fixture
def sessions(postgres_url):
    upgrade(postgres_url)
    factory = make_sessionmaker(postgres_url)
    with session_scope(factory) as session:
        confirmed(session, "alice/secret", 100, private=True, token=PRIVATE_TOKEN)
        confirmed(session, "alice/open", 100, private=False, token=PUBLIC_TOKEN)
        confirmed(session, "bob/app", 200, private=True)
        confirmed(session, "operator/own", None, private=True)
    yield factory
    factory.kw["bind"].dispose()


def texts(examples) -> str:
    return " ".join(example.text for example in examples)


def saved_bytes(trained, directory: Path) -> bytes:
    trained.save(directory, version="isolation")
    return b"".join(path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file())


def test_another_installations_repository_borrows_nothing_by_default(sessions):
    with session_scope(sessions) as session:
        borrowed = other_repositories_examples(session, "bob/app", LABELS)
        assert {e.repo for e in borrowed} == set()  # bob's installation has no other repository
        own_installation = other_repositories_examples(session, "alice/open", LABELS)
        assert {e.repo for e in own_installation} == {"alice/secret"}  # its own installation's: allowed


def test_a_private_repositorys_text_never_reaches_another_installations_tfidf_files(sessions, tmp_path):
    policy = RetrainPolicy(share_public=True)  # the operator shares public repositories: still never private ones
    with session_scope(sessions) as session:
        own, _ = examples_for_scope(session, "bob/app", policy)
        borrowed = other_repositories_examples(session, "bob/app", LABELS, policy=policy)
    assert {e.repo for e in borrowed} == {"alice/open"}
    assert PRIVATE_TOKEN not in texts(own + borrowed) and PUBLIC_TOKEN in texts(borrowed)
    trained = train_tfidf_borrowing(own, borrowed, weight=0.5, labels=LABELS)
    files = saved_bytes(trained, tmp_path / "bob-app")
    assert PUBLIC_TOKEN.encode() in files  # the check can see a borrowed token in the saved vocabulary
    assert PRIVATE_TOKEN.encode() not in files


def test_the_global_model_learns_from_public_and_the_operators_data_unless_an_installation_opts_in(
        sessions, tmp_path):
    with session_scope(sessions) as session:
        default, _ = examples_for_scope(session, GLOBAL_SCOPE, RetrainPolicy())
        opted_in, _ = examples_for_scope(session, GLOBAL_SCOPE, RetrainPolicy(global_installations=frozenset({100})))
    assert {e.repo for e in default} == {"alice/open", "operator/own"}
    files = saved_bytes(train_tfidf(default), tmp_path / "global")
    assert PUBLIC_TOKEN.encode() in files and PRIVATE_TOKEN.encode() not in files
    assert {e.repo for e in opted_in} == {"alice/open", "alice/secret", "operator/own"}
    assert PRIVATE_TOKEN.encode() in saved_bytes(train_tfidf(opted_in), tmp_path / "opted-in")


def test_a_suspended_installation_teaches_no_model(sessions):
    with session_scope(sessions) as session:
        session.get(Installation, 100).suspended_at = dt.datetime.now(dt.UTC)
    with session_scope(sessions) as session:
        default, _ = examples_for_scope(session, GLOBAL_SCOPE, RetrainPolicy())
        shared = other_repositories_examples(session, "bob/app", LABELS, policy=RetrainPolicy(share_public=True))
    assert {e.repo for e in default} == {"operator/own"} and shared == []


@pytest.fixture
def anyones_github(sessions, redis):
    """GitHub as anyone sees it: alice/open public; the database's ids are GitHub's."""
    fake = FakeGitHub(app_id=1).start()
    with session_scope(sessions) as session:
        for repository in session.scalars(select(Repository)):
            fake.add_repo(repository.full_name, installation_id=repository.installation_id or 1)
            fake.set_private(repository.full_name, repository.private)
            repository.github_id = fake.repo_id(repository.full_name)
    yield fake
    fake.stop()


def test_a_repository_made_private_on_github_stops_teaching_shared_models_at_once(sessions, anyones_github, redis):
    """The App never heard of a repository made private (no `repository` events), so the database
    still said public and its issues went on teaching other installations' models and the global model."""
    github = anyones_github
    check = PublicCheck(github.url, redis)
    policy = RetrainPolicy(share_public=True, confirm_public=check)
    with session_scope(sessions) as session:
        assert {e.repo for e in other_repositories_examples(session, "bob/app", LABELS, policy=policy)} == {
            "alice/open"}
        github.set_private("alice/open")
        redis.flushdb()  # the answer kept in Redis would be believed a few minutes more
        borrowed = other_repositories_examples(session, "bob/app", LABELS, policy=policy)
        global_examples, _ = examples_for_scope(session, GLOBAL_SCOPE, policy)
        own_installation = other_repositories_examples(session, "alice/secret", LABELS, policy=policy)
    assert borrowed == [] and {e.repo for e in global_examples} == {"operator/own"}
    assert {e.repo for e in own_installation} == {"alice/open"}  # its own installation still reads it
    assert not github.calls("GET", r"/repos/.*") and github.calls("GET", r"/repositories/\d+")  # by id


def test_github_not_answering_counts_as_private(sessions):
    policy = RetrainPolicy(share_public=True, confirm_public=PublicCheck("http://127.0.0.1:1", timeout_seconds=1))
    with session_scope(sessions) as session:
        assert other_repositories_examples(session, "bob/app", LABELS, policy=policy) == []
