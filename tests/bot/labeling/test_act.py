"""`comment` and `suggest` mode post a decision's comment once.

The decision is committed as pending before GitHub is written; a worker that died after GitHub took the
comment and before the outcome was committed left a pending decision, and RQ's retry posted the comment
again (suggest mode, or `apply: type`), or, in comment mode with the label already on the issue, never
posted a comment that had not gone out. The comment now carries the decision's marker, and a resumed
decision looks for it on the issue first.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from bot.github_api.client import TransientGitHubError
from bot.labeling import decide as labeling
from bot.labeling.comments import MARKER, decision_marker
from core.db import session_scope
from core.tables import Prediction
from tests.bot.rules import LABELS, REPO, run_job, use_config
from tests.fakes import FakeGitHub


class Crash(Exception):
    """The worker process dies here (a kill, the OOM killer)."""


class DyingGitHub(FakeGitHub):
    """GitHub takes the call named `dies_after`, then the worker dies before it hears the answer; once."""

    def __init__(self, *, dies_after: str, error: type[Exception] = Crash, **kwargs):
        super().__init__(**kwargs)
        self.dies_after, self.error = dies_after, error

    def create_comment(self, repo, number, body):
        super().create_comment(repo, number, body)
        self._maybe_die("create_comment")

    def add_labels(self, repo, number, labels):
        super().add_labels(repo, number, labels)
        self._maybe_die("add_labels")

    def _maybe_die(self, call: str) -> None:
        if self.dies_after == call:
            self.dies_after = ""
            raise self.error("the worker died")


def as_a_job(sessions, github, number: int = 1):
    """bot.jobs' labelling job: the decision committed before GitHub is written; the issue's labels as
    GitHub has them (a retry reads the issue again)."""
    result = run_job(sessions, github, number, labels=tuple(github.issue_labels.get((REPO, number), ())),
                     checkpoint=True)
    return result if isinstance(result, str) else result.outcome


def outcomes(sessions) -> list[str]:
    with session_scope(sessions) as session:
        return [p.outcome for p in session.scalars(select(Prediction))]


@pytest.mark.parametrize("mode,dies_after,outcome", [
    ("suggest", "create_comment", "suggested"),
    ("comment", "create_comment", "applied"),
    ("comment", "add_labels", "applied"),  # the label went out, the comment had not: it goes out now
])
def test_a_worker_dying_around_the_comment_posts_it_once(sessions, mode, dies_after, outcome):
    github = DyingGitHub(dies_after=dies_after, labels={REPO: list(LABELS)})
    use_config(github, f"mode: {mode}\n")
    with pytest.raises(Crash):
        as_a_job(sessions, github)
    assert outcomes(sessions) == [labeling.PENDING]

    assert as_a_job(sessions, github) == outcome  # RQ's retry of the same job
    posted = github.comments(REPO, 1)
    assert len(posted) == 1 and posted[0].startswith(MARKER)
    with session_scope(sessions) as session:
        prediction = session.scalars(select(Prediction)).one()
        assert posted[0].endswith(decision_marker(prediction.id)) and prediction.outcome == outcome
    assert as_a_job(sessions, github) in ("it was already handled", "it already carries 'bug'")
    assert len(github.comments(REPO, 1)) == 1


def test_a_first_attempt_reads_no_comments(sessions):
    """Looking for the marker costs a read only when a pending decision is resumed."""
    github = FakeGitHub(labels={REPO: list(LABELS)})
    use_config(github, "mode: suggest\n")
    assert as_a_job(sessions, github) == "suggested"
    assert len(github.comments(REPO, 1)) == 1
    assert not [call for call in github.calls if call[0] == "list_comments"]


class FailingCommentGitHub(FakeGitHub):
    """GitHub answers the comment with a 502 and takes nothing, once."""

    failed = False

    def create_comment(self, repo, number, body):
        if not self.failed:
            self.failed = True
            raise TransientGitHubError("GitHub answered 502", status=502)
        super().create_comment(repo, number, body)


@pytest.mark.parametrize("github", [
    FailingCommentGitHub(labels={REPO: list(LABELS)}),
    # the label's POST timed out unanswered, yet GitHub applied it
    DyingGitHub(dies_after="add_labels", error=lambda why: TransientGitHubError(why), labels={REPO: list(LABELS)}),
], ids=["comment-answered-502", "label-unanswered"])
def test_a_transient_error_once_the_label_may_be_on_keeps_the_decision_and_the_retry_comments(sessions, github):
    """The decision was forgotten on any GitHub error, and the retry found the label on the issue and left
    it alone: no comment, no prediction."""
    use_config(github, "mode: comment\n")
    with pytest.raises(TransientGitHubError):
        as_a_job(sessions, github)
    assert outcomes(sessions) == [labeling.PENDING]
    assert as_a_job(sessions, github) == "applied"
    assert len(github.comments(REPO, 1)) == 1 and github.issue_labels[(REPO, 1)] == ["bug"]
    assert outcomes(sessions) == ["applied"]


def test_an_answered_error_on_the_first_write_still_forgets_the_decision(sessions):
    github = FailingCommentGitHub(labels={REPO: list(LABELS)})
    use_config(github, "mode: suggest\n")
    with pytest.raises(TransientGitHubError):
        as_a_job(sessions, github)
    assert outcomes(sessions) == [] and github.comments(REPO, 1) == []


def test_the_adapter_lists_an_issues_comments_through_every_page():
    """PyGithubWriter.list_comments over real HTTP, where the retry looks for the marker."""
    from bot.github_api.client import GitHubApp
    from simulation.fake_github import FakeGitHub as FakeGitHubServer
    from simulation.fake_github import generate_app_keypair

    private, public = generate_app_keypair()
    with FakeGitHubServer(4242, public) as fake:
        fake.add_repo(REPO, labels=LABELS, installation_id=7)
        fake.add_issue(REPO, 1, "Crash on start", "Traceback ...")
        writer = GitHubApp(4242, private, fake.url, write_interval=0, timeout=5).writer_for(7)
        bodies = [f"comment {n}\n{decision_marker(n)}" for n in range(105)]  # more than a page of 100
        for body in bodies:
            writer.create_comment(REPO, 1, body)
        assert writer.list_comments(REPO, 1) == bodies


class DiesAfterCreatingTheLabel(FakeGitHub):
    """GitHub creates the abstain label, then the worker dies before it puts the label on; once."""

    def create_label(self, repo, name, color, description):
        super().create_label(repo, name, color, description)
        if not getattr(self, "died", False):
            self.died = True
            raise Crash("the worker died")


def test_a_resumed_abstention_puts_its_abstain_label_on(sessions):
    """Chaos runs: 11 to 12 abstentions never got their abstain label. Each was decided, its
    write deferred or its worker killed, and the resumed job logged "resumed after a crash: abstained None"
    and wrote nothing: the resume rebuilt the kind's writes, and an abstention has none but the mark."""
    github = DiesAfterCreatingTheLabel(labels={REPO: list(LABELS)})
    use_config(github, "abstain_label: needs-triage\n")
    with pytest.raises(Crash):
        as_a_job(sessions, github, 3)  # "Hello": the model is not sure of any kind
    assert outcomes(sessions) == [labeling.PENDING] and github.issue_labels.get((REPO, 3)) is None
    assert as_a_job(sessions, github, 3) == "abstained"
    assert github.issue_labels[(REPO, 3)] == ["needs-triage"]
    assert [call[0] for call in github.writes()] == ["create_label", "add_labels"]  # created once
