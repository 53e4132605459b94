"""The rules' harness: run exactly what the labelling and feedback jobs run, on SQLite with tests/fakes.py.

No Redis, torch or HTTP: a rule test takes milliseconds. `run_job` is bot.jobs' labelling job without its
RQ boundary (the delivery marker, retries), `record` its feedback job's domain call. The same rules run
end to end, through a real RQ worker and the fake GitHub over HTTP, in a few plumbing tests per family.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import select

from bot.decisions import feedback
from bot.github_api.issues import IssueSnapshot
from bot.intake.events import IssueEvent
from bot.labeling import act as labeling_writes
from bot.labeling import decide as labeling
from bot.labeling import gather as labeling_inputs
from bot.labeling.config import CONFIG_PATH, parse_config
from core import store
from core.db import session_scope
from core.settings import Settings
from core.tables import IssueRecord, LabelEvent, Prediction
from tests.fakes import FakeClassifier, FakeGitHub

REPO = "octo/widgets"
BOT = "issue-sorter[bot]"
LABELS = ["bug", "enhancement", "question", "documentation"]
SETTINGS = Settings(webhook_secret="s", threshold=0.5)
CLASSIFIER = FakeClassifier({"crash": "bug", "please add": "feature", "how do i": "question"})
ISSUES = {1: ("App crash on save", "Traceback ..."), 2: ("Please add dark mode", ""), 3: ("Hello", "hm")}


def repository(**fields) -> FakeGitHub:
    """The in-memory GitHub of one installation, with REPO and its four usual labels."""
    return FakeGitHub(**{"labels": {REPO: list(LABELS)}, **fields})


def snapshot(number: int, **fields) -> IssueSnapshot:
    title, body = ISSUES.get(number, ("", ""))
    issue = IssueSnapshot(number, title, body, "open", (), False, "reporter", None)
    return dataclasses.replace(issue, **fields)


def opened(number: int, **fields) -> dict:
    """An `issues.opened` job's arguments, its copy of the issue fresh (so nothing is read again) unless
    `updated_at` says otherwise."""
    issue = snapshot(number, **{"updated_at": dt.datetime.now(dt.UTC), **fields})
    return IssueEvent(delivery_id=f"d-{number}", action="opened", installation_id=1, repo=REPO, number=number,
                      sender_login="reporter", sender_is_bot=False, snapshot=issue).job_kwargs()


def run_job(sessions, github, number: int, *, classifier=CLASSIFIER, settings=SETTINGS, checkpoint=False,
            claimed: set | None = None, **fields):
    """What bot.jobs does for `issues.opened`: gather, decide, carry out, in one session. `claimed` holds
    the once-only keys already claimed (Redis in a worker): share it between jobs that share a Redis."""
    with session_scope(sessions) as session:
        gathered = labeling_inputs.gather(session, opened(number, **fields),
                                          labeling_inputs.Sources(settings, github, lambda repo: classifier))
        if isinstance(gathered, str):
            return gathered
        claimed = set() if claimed is None else claimed
        return labeling_writes.carry_out(session, gathered, labeling.decide(gathered.inputs), github,
                                         delivery_id=f"d-{number}",
                                         claim=lambda key: key not in claimed and not claimed.add(key),
                                         checkpoint=session.commit if checkpoint else lambda: None)


def use_config(github: FakeGitHub, text: str, *, repo: str = REPO) -> None:
    """Commit `text` as `repo`'s config file, problems and all."""
    github.files[(repo, CONFIG_PATH)] = text


def label(sessions, github, number: int, *, config: str | None = None, classifier=CLASSIFIER, dry_run=False,
          settings=SETTINGS, claimed: set | None = None, **fields):
    """Run the labelling job: (outcome, label, reason), or why the issue was left alone. A `config` given
    here must parse cleanly (a test of a broken file commits it with `use_config`)."""
    if config is not None:
        assert parse_config(config)[1] == []
        use_config(github, config)
    result = run_job(sessions, None if dry_run else github, number, classifier=classifier, settings=settings,
                     claimed=claimed, **fields)
    return result if isinstance(result, str) else (result.outcome, result.label, result.reason)


def predictions(sessions) -> list[Prediction]:
    with session_scope(sessions) as session:
        return session.scalars(select(Prediction).order_by(Prediction.id)).all()


# ---- feedback ---------------------------------------------------------------------------------------

def event(action: str, number: int, *, labels=(), label=None, sender="maintainer", is_bot=False,
          delivery: str | None = None, **fields) -> dict:
    """An `issues` job's arguments as GitHub sends them: `labels` is the issue's labels after the change."""
    state = "closed" if action == "closed" else "open"
    return IssueEvent(delivery_id=delivery or f"{action}-{number}-{label}", action=action, installation_id=1,
                      repo=REPO, number=number, sender_login=sender, sender_is_bot=is_bot,
                      snapshot=snapshot(number, state=state, labels=tuple(labels), **fields),
                      label=label).job_kwargs()


def record(sessions, data: dict) -> str:
    """What the feedback job does with one `issues` event; its outcome."""
    with session_scope(sessions) as session:
        return feedback.record_issue_event(session, data, bot_login=BOT, app_id=1)


def issue_row(sessions, number: int) -> tuple:
    """(confirmed label, the latest prediction's decision, title) of a stored issue."""
    with session_scope(sessions) as session:
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == number)).one()
        prediction = store.latest_prediction(session, issue)
        return issue.confirmed_label, prediction.decision if prediction else None, issue.title


def stored_issue(sessions, number: int) -> IssueRecord:
    with session_scope(sessions) as session:
        return session.scalars(select(IssueRecord).where(IssueRecord.number == number)).one()


def label_events(sessions) -> list[tuple]:
    """(action, label, actor, is human, by this App) of every stored label event, in order."""
    with session_scope(sessions) as session:
        return [(e.action, e.label, e.actor_login, e.actor_is_human, e.by_this_app)
                for e in session.scalars(select(LabelEvent).order_by(LabelEvent.id))]
