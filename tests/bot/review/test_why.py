"""Why this label: the labelling job keeps the model's own scores, the confirmed issues that
voted and the threshold with the prediction (the memory computed them and the job dropped them); the
default comment links the most similar confirmed issues."""

from __future__ import annotations

import dataclasses
import datetime as dt

from bot.github_api.issues import IssueSnapshot
from bot.intake.events import IssueEvent
from bot.labeling import act as labeling_writes
from bot.labeling import gather as labeling_inputs
from bot.labeling.decide import decide
from core import memory, store
from core.db import session_scope
from core.issue_text import format_issue_text
from core.settings import Settings
from core.tables import Prediction
from tests.fakes import FakeEncoder, FakeGitHub

REPO = "octo/widgets"
TITLE, BODY = "Crash when saving", "Traceback ..."


def opened(number: int) -> dict:
    issue = IssueSnapshot(number, TITLE, BODY, "open", (), False, "reporter", None,
                          updated_at=dt.datetime.now(dt.UTC))
    return IssueEvent(delivery_id=f"d-{number}", action="opened", installation_id=1, repo=REPO, number=number,
                      sender_login="reporter", sender_is_bot=False, snapshot=issue).job_kwargs()


def with_memory(sessions, encoder) -> None:
    """Seven confirmed issues; #103 has the new issue's very embedding (similarity 1)."""
    twin = encoder.embed([format_issue_text(TITLE, BODY)])[0]
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, REPO, 1)
        for number in range(100, 107):
            row, _ = store.upsert_issue(session, repository, number, title=f"Old crash {number}", body="",
                                        author_login="a", state="closed")
            row.confirmed_label, row.confirmed_by = "bug", "backfill"
            session.flush()
            vector = twin if number == 103 else encoder.embed([f"other {number}"])[0]
            memory.remember(session, row, "bug", encoder.version, vector)


def gathered(sessions, encoder, session):
    sources = labeling_inputs.Sources(Settings(webhook_secret="s", threshold=0.5),
                                      FakeGitHub(labels={REPO: ["bug", "enhancement", "question"]}),
                                      lambda repo: encoder)
    return labeling_inputs.gather(session, opened(1), sources)


def test_the_prediction_keeps_the_models_scores_the_voters_and_the_threshold(sessions):
    encoder = FakeEncoder({"crash": "bug"}, version="fake-1")
    with_memory(sessions, encoder)
    with session_scope(sessions) as session:
        found = gathered(sessions, encoder, session)
        plan = decide(found.inputs)
        prediction = labeling_writes.carry_out(session, found, plan, None)
        prediction_id = prediction.id
    with session_scope(sessions) as session:
        stored = session.get(Prediction, prediction_id)
        assert stored.model_scores == found.inputs.scores  # before the memory
        assert stored.scores == plan.scores  # as served, after it
        assert len(stored.neighbours) == memory.MemoryRule().neighbours
        assert stored.neighbours[0]["number"] == 103 and stored.neighbours[0]["label"] == "bug"
        assert stored.neighbours[0]["similarity"] > 0.999
        assert {voter["number"] for voter in stored.neighbours} <= set(range(100, 107))
        assert stored.threshold == 0.5


def test_the_default_comment_links_the_most_similar_confirmed_issues(sessions):
    encoder = FakeEncoder({"crash": "bug"}, version="fake-1")
    with_memory(sessions, encoder)
    with session_scope(sessions) as session:
        found = gathered(sessions, encoder, session)
    for mode in ("comment", "suggest"):
        inputs = dataclasses.replace(found.inputs, policy=dataclasses.replace(found.inputs.policy, mode=mode))
        plan = decide(inputs)
        [comment] = [write.args[2] for write in plan.writes if write.call == "create_comment"]
        line = comment.splitlines()[-1]
        assert line.startswith("Similar confirmed issues: #103, #") and line.count("#") == 3, comment
    custom = dataclasses.replace(found.inputs.policy, mode="comment", comment_template="Looks like {label}.")
    plan = decide(dataclasses.replace(found.inputs, policy=custom))
    assert [write.args[2] for write in plan.writes if write.call == "create_comment"] == ["Looks like `bug`."]
