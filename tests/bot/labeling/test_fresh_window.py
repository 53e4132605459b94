"""The fresh-delivery window cannot hide a maintainer's word.

For ISSUE_SORTER_FRESH_DELIVERY_SECONDS the labelling job trusts the delivery's copy of the issue instead of
reading it again. A maintainer who labelled the issue in those seconds, or put a label on and took it off,
was not in that copy: the bot added its own kind label beside theirs, or put back the one they removed.
The label's write answers with the issue's labels as GitHub has them; against that answer (and the
feedback stored meanwhile) the bot takes its label off again, and never puts it back.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from bot.github_api.write_spacing import SLOT_KEY, SpacedGitHub, WriteDeferred, WriteSpacing
from bot.labeling.act import WITHDRAWN
from core.db import session_scope
from core.tables import Prediction
from tests.bot import rules
from tests.bot.rules import REPO


def stored(sessions) -> list[tuple]:
    with session_scope(sessions) as session:
        return [(p.outcome, p.applied, p.label) for p in session.scalars(select(Prediction))]


def test_a_label_a_maintainer_put_on_in_the_window_keeps_the_bots_off(sessions):
    github = rules.repository(issue_labels={(REPO, 1): ["enhancement"]})  # GitHub's; the copy has none
    assert rules.label(sessions, github, 1)[0] == WITHDRAWN
    assert github.issue_labels[(REPO, 1)] == ["enhancement"]
    assert [call[0] for call in github.writes()] == ["add_labels", "remove_label"]
    assert stored(sessions) == [(WITHDRAWN, False, "bug")]
    with session_scope(sessions) as session:
        assert "a maintainer labelled it 'enhancement' meanwhile" in session.scalars(select(Prediction)).one().reason


class RemovedMeanwhile(rules.FakeGitHub):
    """A maintainer puts `bug` on and takes it off while the bot classifies; the feedback queue records both
    before the bot's write reaches GitHub."""

    def __init__(self, sessions, **kwargs):
        super().__init__(**kwargs)
        self.sessions = sessions

    def add_labels(self, repo, number, labels):
        if not self.calls or self.calls[-1][0] != "add_labels":
            rules.record(self.sessions, rules.event("labeled", number, labels=["bug"], label="bug"))
            rules.record(self.sessions, rules.event("unlabeled", number, labels=[], label="bug"))
        return super().add_labels(repo, number, labels)


def test_a_label_a_maintainer_took_off_in_the_window_is_taken_off_again_and_never_put_back(sessions):
    github = RemovedMeanwhile(sessions, labels={REPO: list(rules.LABELS)})
    # as bot.jobs runs it: the decision committed before the write (the feedback job writes meanwhile)
    assert rules.run_job(sessions, github, 1, checkpoint=True).outcome == WITHDRAWN
    assert github.issue_labels[(REPO, 1)] == []
    assert rules.label(sessions, github, 1) == "it was already handled"  # a redelivery, a retry
    assert [call[0] for call in github.writes()] == ["add_labels", "remove_label"]


def test_a_resumed_decision_reads_the_issue_as_its_answer(sessions):
    """A job died after its label went on; meanwhile a maintainer added theirs: the retry sees both."""
    github = rules.repository(issue_labels={(REPO, 1): ["bug", "enhancement"]})
    assert rules.run_job(sessions, rules.FakeGitHub(labels={REPO: list(rules.LABELS)}), 1,
                         checkpoint=False).outcome == "applied"  # a first attempt, as a store of the decision
    with session_scope(sessions) as session:
        session.scalars(select(Prediction)).one().outcome = "applying"  # it died before the outcome's commit
    result = rules.run_job(sessions, github, 1, labels=("bug", "enhancement"), checkpoint=True)
    assert result.outcome == WITHDRAWN and github.issue_labels[(REPO, 1)] == ["enhancement"]


def test_an_unchanged_issue_costs_no_extra_call(sessions):
    github = rules.repository()
    assert rules.label(sessions, github, 1)[:2] == ("applied", "bug")
    assert [call[0] for call in github.writes()] == ["add_labels"]
    assert stored(sessions) == [("applied", True, "bug")]


def test_the_adapter_returns_the_labels_githubs_answer_lists():
    from bot.github_api.client import GitHubApp
    from simulation.fake_github import FakeGitHub as FakeGitHubServer
    from simulation.fake_github import generate_app_keypair

    private, public = generate_app_keypair()
    with FakeGitHubServer(4242, public) as fake:
        fake.add_repo(REPO, labels=rules.LABELS, installation_id=7)
        fake.add_issue(REPO, 1, "Crash on start", "Traceback ...", labels=["enhancement"])
        writer = GitHubApp(4242, private, fake.url, write_interval=0, timeout=5).writer_for(7)
        assert writer.add_labels(REPO, 1, ["bug"]) == ["enhancement", "bug"]
        assert fake.issue_labels(REPO, 1) == ["enhancement", "bug"]
        assert writer.add_labels(REPO, 1, []) is None


@pytest.mark.redis
def test_a_withdrawal_the_write_spacing_defers_is_finished_by_the_rescheduled_job(sessions, redis):
    """Taking the label off is a second write within the installation's interval: it waits its turn."""
    github = rules.repository(issue_labels={(REPO, 1): ["enhancement"]})
    turns = iter([False, False, True])  # the rescheduled run holds the withdrawal's turn
    spaced = SpacedGitHub(github, WriteSpacing(redis, 3.0), 1, turn=lambda: next(turns, False))
    with pytest.raises(WriteDeferred):
        rules.run_job(sessions, spaced, 1, checkpoint=True)
    assert stored(sessions) == [("applying", False, "bug")]
    assert github.issue_labels[(REPO, 1)] == ["enhancement", "bug"]
    redis.delete(SLOT_KEY.format(1))  # the interval has passed: its turn has come
    result = rules.run_job(sessions, spaced, 1, checkpoint=True, labels=("enhancement", "bug"))
    assert result.outcome == WITHDRAWN and github.issue_labels[(REPO, 1)] == ["enhancement"]
