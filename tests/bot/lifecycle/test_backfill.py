"""Backfill on installation: signed `installation` delivery → Redis → RQ worker → one backfill job per
repository, paging the fake GitHub's issues over real HTTP into confirmed training data."""

import time

import pytest
from rq.registry import FailedJobRegistry, ScheduledJobRegistry
from rq.scheduler import RQScheduler
from sqlalchemy import select

from bot.lifecycle.backfill import BACKFILL_DONE, training_label
from core.db import session_scope
from core.queues import FEEDBACK_QUEUE, SERIALIZER
from core.tables import Installation, IssueRecord, Repository
from tests.bot.conftest import INSTALLATION, REPO, deliver, run_worker

pytestmark = pytest.mark.redis
ISSUES = [  # number, labels, is a pull request, what it teaches
    (1, ["bug"], False, "bug"),
    (2, ["enhancement", "good first issue"], False, "enhancement"),
    (3, ["question"], False, "question"),
    (4, ["bug"], True, None),  # a pull request
    (5, [], False, None),  # nobody labelled it
    (6, ["duplicate"], False, None),  # the lesson's rules: not worth learning from
    (7, ["bug", "enhancement"], False, None),  # labels that disagree
    (8, ["area/ui"], False, "area/ui"),  # a lone label of the repository's own
    (9, ["Type: Bug", "needs triage"], False, "Type: Bug"),
]


@pytest.mark.parametrize("labels,taught", [
    (("bug",), "bug"), (("Type: Feature Request", "good first issue"), "Type: Feature Request"),
    (("kind/bug", "area/ui"), "kind/bug"), (("documentation",), "documentation"), (("area/ui",), "area/ui"),
    ((), None), (("bug", "question"), None), (("area/ui", "area/api"), None),
    (("duplicate",), None), (("bug", "duplicate"), None), (("spam",), None), (("question-answered",), None),
])
def test_training_label_is_the_kinds_label_or_a_lone_label(labels, taught):
    assert training_label(labels) == taught


def installation_delivery(payload, event: str) -> dict:
    """A real `installation.created` or `installation_repositories.added` example, for our installation."""
    data = payload({"installation": "installation/created",
                    "installation_repositories": "installation_repositories/added"}[event])
    data["installation"]["id"] = INSTALLATION
    key = "repositories" if event == "installation" else "repositories_added"
    data[key] = [{"id": 1, "node_id": "R_1", "name": "Hello-World", "full_name": REPO, "private": False}]
    return data


def add_issues(fake_github, issues=ISSUES) -> None:
    for number, labels, is_pull_request, _ in issues:
        fake_github.add_issue(REPO, number, f"Issue {number}", f"Body of {number}", labels=labels,
                              is_pull_request=is_pull_request, state="closed" if number % 2 else "open")


def confirmed(ctx) -> dict[int, str]:
    with session_scope(ctx.sessionmaker) as session:
        rows = session.scalars(select(IssueRecord).order_by(IssueRecord.number)).all()
        assert all(row.confirmed_by == "backfill" for row in rows)
        return {row.number: row.confirmed_label for row in rows}


def next_page(ctx) -> int | None:
    with session_scope(ctx.sessionmaker) as session:
        return session.scalars(select(Repository).where(Repository.full_name == REPO)).one().backfill_next_page


def pages_read(fake_github) -> list[tuple[str, int]]:
    return [(r.query["page"], r.status) for r in fake_github.calls("GET", rf"/repos/{REPO}/issues")]


def run_due_retries(redis) -> None:
    scheduler = RQScheduler([FEEDBACK_QUEUE], connection=redis, serializer=SERIALIZER)
    scheduler.acquire_locks()
    scheduler.enqueue_scheduled_jobs()
    scheduler.release_locks()
    run_worker(redis, queues=(FEEDBACK_QUEUE,))


class FailingAfterFirstPage:
    """The real GitHub adapter; once page 1 was read, the fake GitHub answers the next page with `status`.

    The fake matches failures by path, and every page has the same path: this is what puts the failure
    between two pages."""

    def __init__(self, writer, fake_github, status: int, headers=None):
        self._writer, self._fake, self._status, self._headers = writer, fake_github, status, headers

    def list_issues_page(self, repo: str, page: int, per_page: int = 100):
        issues = self._writer.list_issues_page(repo, page, per_page)
        if page == 1:
            self._fake.fail_next("GET", rf"/repos/{repo}/issues", self._status, headers=self._headers)
        return issues

    def __getattr__(self, name):
        return getattr(self._writer, name)


def fail_after_first_page(ctx, fake_github, status: int, headers=None) -> None:
    real = ctx.github_for
    ctx.github_for = lambda installation_id: FailingAfterFirstPage(real(installation_id), fake_github, status,
                                                                   headers)


def many_labelled_issues(fake_github, count: int = 150) -> None:
    add_issues(fake_github, [(n, ["bug" if n % 2 else "enhancement"], False, None) for n in range(1, count + 1)])


@pytest.mark.parametrize("event", ["installation", "installation_repositories"])
def test_a_new_installation_stores_each_repositorys_labelled_issues_as_training_data(
        bare_context, fake_github, client, payload, redis, event):
    add_issues(fake_github)
    assert deliver(client, event, installation_delivery(payload, event), "d-install").status_code == 202
    run_worker(redis)
    assert confirmed(bare_context) == {n: taught for n, _, _, taught in ISSUES if taught}
    assert next_page(bare_context) == BACKFILL_DONE
    with session_scope(bare_context.sessionmaker) as session:
        assert session.get(Installation, INSTALLATION).account_login == "Codertocat"
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == 3)).one()
        assert (issue.title, issue.body, issue.state) == ("Issue 3", "Body of 3", "closed")


def test_the_backfill_stops_at_max_issues(bare_context, fake_github, client, payload, redis):
    add_issues(fake_github)
    bare_context.backfill_max_issues = 2
    deliver(client, "installation", installation_delivery(payload, "installation"), "d-install")
    run_worker(redis)
    assert confirmed(bare_context) == {1: "bug", 2: "enhancement"}  # the oldest first


def test_a_5xx_between_pages_reschedules_and_the_saved_page_is_resumed(bare_context, fake_github, client, payload,
                                                                       redis):
    many_labelled_issues(fake_github)
    fail_after_first_page(bare_context, fake_github, 502)
    deliver(client, "installation", installation_delivery(payload, "installation"), "d-install")
    run_worker(redis)
    assert len(confirmed(bare_context)) == 100 and next_page(bare_context) == 2
    assert ScheduledJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).count == 1
    time.sleep(2.05)  # retry_base_seconds = 1 in the harness, rounded up to the next whole second
    run_due_retries(redis)
    assert pages_read(fake_github) == [("1", 200), ("2", 502), ("2", 200)]  # page 1 is not read again
    assert len(confirmed(bare_context)) == 150 and next_page(bare_context) == BACKFILL_DONE
    assert FailedJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).count == 0


def test_the_bound_holds_across_a_resumed_backfill(bare_context, fake_github, client, payload, redis):
    """A backfill interrupted after page 1 (100 issues) restarted its count at zero when resumed, so with
    max_issues=120 it stored 150: every interruption added up to another max_issues."""
    many_labelled_issues(fake_github)
    bare_context.backfill_max_issues = 120
    fail_after_first_page(bare_context, fake_github, 502)
    deliver(client, "installation", installation_delivery(payload, "installation"), "d-install")
    run_worker(redis)
    time.sleep(2.05)
    run_due_retries(redis)
    assert len(confirmed(bare_context)) == 120


def test_a_rate_limited_page_reschedules_the_backfill_at_githubs_reset_time(bare_context, fake_github, client,
                                                                            payload, redis):
    many_labelled_issues(fake_github)
    reset = int(time.time()) + 600
    fail_after_first_page(bare_context, fake_github, 403,
                          headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
    deliver(client, "installation", installation_delivery(payload, "installation"), "d-install")
    run_worker(redis)
    scheduled = ScheduledJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER)
    (job_id,) = scheduled.get_job_ids()
    assert abs(scheduled.get_scheduled_time(job_id).timestamp() - reset) < 5
    assert len(confirmed(bare_context)) == 100 and next_page(bare_context) == 2
