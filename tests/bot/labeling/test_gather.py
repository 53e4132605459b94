"""The gather step of the labelling job (bot.labeling.gather), on SQLite with tests/fakes.py: what it reads,
what it leaves alone, and that a labelling job embeds only the issue it labels."""

import datetime as dt

from sqlalchemy import func, select

from bot.github_api.issues import IssueSnapshot
from bot.intake.events import IssueEvent
from bot.labeling import gather as labeling_inputs
from bot.labeling.decide import decide
from core import memory, store
from core.db import session_scope
from core.settings import Settings
from core.tables import LabelEvent, MemoryEntry
from tests.fakes import FakeEncoder, FakeGitHub
from tests.sql_statements import statements

REPO = "octo/widgets"
SETTINGS = Settings(webhook_secret="s", threshold=0.5)
HISTORY = [(100 + n, f"Crash number {n} when saving", "Traceback ...", "bug") for n in range(6)]


def opened(number: int, title: str, body: str = "") -> dict:
    issue = IssueSnapshot(number, title, body, "open", (), False, "reporter", None,
                          updated_at=dt.datetime.now(dt.UTC))
    return IssueEvent(delivery_id=f"d-{number}", action="opened", installation_id=1, repo=REPO, number=number,
                      sender_login="reporter", sender_is_bot=False, snapshot=issue).job_kwargs()


def with_history(sessions, encoder, *, embedded: int) -> None:
    """The repository's labelled history, as the backfill stores it; the first `embedded` in its memory,
    with the model's own scores of each, as the fill stores them."""
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, REPO, 1)
        for i, (number, title, body, label) in enumerate(HISTORY):
            row, _ = store.upsert_issue(session, repository, number, title=title, body=body, author_login="a",
                                        state="closed")
            row.confirmed_label, row.confirmed_by = label, "backfill"
            session.flush()
            if i < embedded:
                memory.remember(session, row, label, encoder.version, encoder.embed([title])[0],
                                scores=encoder.predict([title])[0])  # as the fill stores them
    encoder.embedded.clear()


def gather(sessions, encoder, event):
    sources = labeling_inputs.Sources(SETTINGS, FakeGitHub(labels={REPO: ["bug", "enhancement", "question"]}),
                                      lambda repo: encoder)
    with session_scope(sessions) as session:
        gathered = labeling_inputs.gather(session, event, sources)
        rows = session.scalar(select(func.count(MemoryEntry.id)))
        return gathered, rows


def test_a_labelling_job_embeds_only_the_issue_it_labels_and_reads_the_memory_as_it_is(sessions):
    encoder = FakeEncoder({"crash": "bug", "please add": "feature"}, version="fake-1")
    with_history(sessions, encoder, embedded=2)  # four confirmed issues not embedded yet: the fill's work
    gathered, rows = gather(sessions, encoder, opened(1, "Please add dark mode"))
    assert encoder.embedded == ["Please add dark mode"]  # the issue itself, nothing of the history
    assert rows == 2 and len(gathered.inputs.memory) == 2  # what was there, no more
    assert gathered.inputs.vector is not None and gathered.inputs.scores["feature"] > 0.5


def test_the_memory_gathered_moves_the_decision(sessions):
    encoder = FakeEncoder({"please add": "feature"}, version="fake-1")
    with_history(sessions, encoder, embedded=len(HISTORY))  # six confirmed bugs
    gathered, _ = gather(sessions, encoder, opened(1, "Crash number 3 when saving", "Traceback ..."))
    plan = decide(gathered.inputs)
    assert gathered.inputs.scores["bug"] < 0.5 < plan.scores["bug"]  # the model is unsure; its neighbours are not
    assert (plan.predicted, plan.label, plan.outcome) == ("bug", "bug", "applied")


def test_an_issue_to_leave_alone_costs_no_model_and_no_label_listing(sessions):
    encoder = FakeEncoder({"crash": "bug"}, version="fake-1")
    event = opened(1, "App crash")
    event["snapshot"]["state"] = "closed"
    gathered, _ = gather(sessions, encoder, event)
    assert gathered.inputs.skip == "it is closed"
    assert encoder.seen == [] and encoder.embedded == [] and gathered.inputs.repo_labels == []


def test_a_new_issue_costs_no_reads_of_its_past_and_a_known_one_keeps_its_removed_labels(sessions):
    """A row the job creates has no prediction and no label event yet: the job does not ask for them. An issue
    stored before (a label event came first) is asked, and a label a human took off stays off."""
    encoder = FakeEncoder({"crash": "bug"}, version="fake-1")
    with statements(sessions) as new:
        gathered, _ = gather(sessions, encoder, opened(1, "App crash on start"))
    assert gathered.inputs.policy.never_again == frozenset()
    asks = ("SELECT predictions.id", "SELECT label_events.label")  # its stored prediction, its label events
    assert not [sql for sql in new if sql.lstrip().startswith(asks)]
    with session_scope(sessions) as session:  # issue 2 is known: a maintainer took "bug" off it
        repository = store.ensure_repository(session, REPO, 1)
        row, _ = store.upsert_issue(session, repository, 2, title="App crash", body="", author_login="a",
                                    state="open")
        session.add(LabelEvent(issue_id=row.id, action="unlabeled", label="bug", actor_login="maintainer"))
    with statements(sessions) as known:
        gathered, _ = gather(sessions, encoder, opened(2, "App crash on start"))
    assert gathered.inputs.policy.never_again == frozenset({"bug"})
    assert all(any(sql.lstrip().startswith(ask) for sql in known) for ask in asks)


def test_the_model_passes_inside_an_inference_slot_and_nothing_else_does(sessions):
    """With several workers on a machine, only the model's pass waits for a slot (core.inference_slots):
    the database and GitHub calls around it go on while other workers' passes run."""
    encoder = FakeEncoder({"please add": "feature"}, version="fake-1")
    with_history(sessions, encoder, embedded=2)
    held, during = [], []

    class RecordingSlot:
        def __enter__(self):
            held.append("in")
            during.append(list(encoder.embedded))

        def __exit__(self, *exc):
            held.append("out")
            during.append(list(encoder.embedded))

    sources = labeling_inputs.Sources(SETTINGS, FakeGitHub(labels={REPO: ["bug", "enhancement", "question"]}),
                                      lambda repo: encoder, inference=RecordingSlot)
    with session_scope(sessions) as session:
        gathered = labeling_inputs.gather(session, opened(1, "Please add dark mode"), sources)
    assert held == ["in", "out"]  # one pass, one slot
    assert during == [[], ["Please add dark mode"]]  # the issue was embedded while the slot was held
    assert gathered.inputs.scores["feature"] > 0.5
