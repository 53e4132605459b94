"""The repository's own labels beside the kind, on the rules' harness (tests/bot/rules.py): one
decision per label from the confirmed issues that carry it, applied only from `min_examples` confirmed
examples and in the kind's one write, narrowed by the config's `areas`, judged by maintainers like the
kind (a label they remove is never put back), and learnt from the backfill with every label an issue has."""

import itertools

import pytest
from sqlalchemy import select

from bot.labeling import decide as labeling
from bot.labeling.config import CONFIG_PATH, parse_config
from bot.lifecycle.backfill import backfill
from bot.review import decide, quality
from bot.review import decisions as review_rows
from core import memory, own_labels, store
from core.db import session_scope
from core.tables import IssueRecord, MemoryEntry, OwnLabelDecision, OwnLabelExample
from tests.bot.rules import (
    LABELS,
    REPO,
    event,
    label,
    predictions,
    record,
    run_job,
    snapshot,
    stored_issue,
    use_config,
)
from tests.fakes import FakeEncoder, FakeGitHub

TOPICS = {"stream": (1.0, 0.1, 0.0), "image": (0.1, 1.0, 0.0)}  # an issue's words → where it lies


class TopicEncoder(FakeEncoder):
    """Embeds an issue by its topic's word, so the confirmed issues that vote are the ones a test means."""

    def embed(self, texts):
        self.embedded.extend(texts)
        return [list(next((TOPICS[word] for word in sorted(TOPICS, key=len, reverse=True)
                           if word in text.lower()), (0.0, 0.0, 1.0))) for text in texts]


ENCODER = TopicEncoder({"crash": "bug", "please add": "feature"}, ["bug", "feature", "question"])
OWN = ["streaming", "vision", "speech"]  # speech: a label of the repository nobody has confirmed
REPOSITORY_LABELS = [*LABELS, *OWN, "good first issue"]  # the kinds' labels and its own
WRITES_OWN_LABELS = "areas: true\n"  # own labels are written only where the config sets areas
# the repository writes own labels unless a test commits another config
pytestmark = pytest.mark.github(labels={REPO: REPOSITORY_LABELS}, files={(REPO, CONFIG_PATH): WRITES_OWN_LABELS})


def confirmed_history(sessions, streaming: int = own_labels.DEFAULT_MIN_EXAMPLES + 1,
                      vision: int = own_labels.DEFAULT_MIN_EXAMPLES + 1) -> None:
    """Confirmed issues in the repository's memory: `streaming` about streams, `vision` about images; by
    default one more of each than a label needs to be applied."""
    streams = [(f"Stream stops with a crash, case {i}", "streaming") for i in range(streaming)]
    images = [(f"Image fails with a crash, case {i}", "vision") for i in range(vision)]
    # in time order the two kinds alternate: neither label looks like one the maintainers stopped using
    issues = [issue for pair in itertools.zip_longest(streams, images) for issue in pair if issue]
    with session_scope(sessions) as session:
        repo = store.ensure_repository(session, REPO, 1)
        for number, (title, own) in enumerate(issues, start=100):
            issue, _ = store.upsert_issue(session, repo, number, title=title, body="", author_login="x",
                                          state="closed")
            issue.confirmed_label, issue.confirmed_by = "bug", "maintainer"
            session.flush()
            memory.remember(session, issue, "bug", ENCODER.version, ENCODER.embed([title])[0])
            own_labels.confirm(session, issue, own, "maintainer")


def streaming_issue(sessions, github, number: int = 1, **kwargs):
    return label(sessions, github, number, classifier=ENCODER, title="Stream stops with a crash", body="",
                 **kwargs)


def own_decisions(sessions, number: int = 1) -> list[tuple]:
    with session_scope(sessions) as session:
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == number)).one()
        prediction = store.latest_prediction(session, issue)
        return [(row.label, row.outcome, row.decision) for row in prediction.own_labels]


def examples(sessions, number: int) -> list[str]:
    with session_scope(sessions) as session:
        return sorted(session.scalars(select(OwnLabelExample.label).join(IssueRecord).where(
            IssueRecord.number == number)))


# ---- decisions ------------------------------------------------------------------------------------------

def test_an_area_with_enough_confirmed_examples_goes_on_beside_the_kind_in_one_write(sessions, github):
    confirmed_history(sessions)
    outcome, kind, reason = streaming_issue(sessions, github)
    assert (outcome, kind) == ("applied", "bug") and "'streaming'" in reason
    assert github.writes() == [("add_labels", REPO, 1, ("bug", "streaming"))]  # kind and area: one call
    assert own_decisions(sessions) == [("streaming", "applied", None)]  # vision votes low; speech has none
    with session_scope(sessions) as session:
        row = session.scalars(select(OwnLabelDecision)).one()
        assert row.threshold is not None and row.score >= row.threshold


def test_several_own_labels_go_on_in_the_same_single_write(sessions, github):
    TOPICS["stream image"] = (0.7, 0.7, 0.0)  # issues about both
    try:
        confirmed_history(sessions)
        with session_scope(sessions) as session:  # the issues about both carry both labels
            repo = store.ensure_repository(session, REPO, 1)
            for number in range(200, 206):
                issue, _ = store.upsert_issue(session, repo, number, title="Stream image crash", body="",
                                              author_login="x", state="closed")
                issue.confirmed_label = "bug"
                session.flush()
                memory.remember(session, issue, "bug", ENCODER.version, TOPICS["stream image"])
                own_labels.confirm(session, issue, "streaming", "maintainer")
                own_labels.confirm(session, issue, "vision", "maintainer")
        outcome = label(sessions, github, 1, classifier=ENCODER, title="Stream image crash", body="")[0]
        assert outcome == "applied"
    finally:
        del TOPICS["stream image"]
    assert github.writes() == [("add_labels", REPO, 1, ("bug", "streaming", "vision"))]


def test_below_min_examples_an_own_label_is_a_suggestion_on_the_review_page_only(sessions, github):
    confirmed_history(sessions, streaming=3)
    assert streaming_issue(sessions, github)[0] == "applied"
    assert github.writes() == [("add_labels", REPO, 1, ("bug",))]
    assert own_decisions(sessions) == [("streaming", "suggested", None)]
    # the repository says three examples are enough
    assert streaming_issue(sessions, github, 2, config="areas: true\nmin_examples: 3\n")[0] == "applied"
    assert github.writes()[-1] == ("add_labels", REPO, 2, ("bug", "streaming"))


def test_by_default_an_own_label_is_applied_from_its_twentieth_confirmed_example(sessions, github):
    """Below 20 the thresholds did not keep the precision target (bench.own_labels on huggingface/datasets:
    labels with 5-19 examples applied at 0.6-0.7); from the twentieth example on the label goes on."""
    confirmed_history(sessions, streaming=19)
    streaming_issue(sessions, github, 1)
    assert own_decisions(sessions, 1) == [("streaming", "suggested", None)]
    with session_scope(sessions) as session:
        repo = store.ensure_repository(session, REPO, 1)
        issue, _ = store.upsert_issue(session, repo, 99, title="Stream stops with a crash, case 19", body="",
                                      author_login="x", state="closed")
        issue.confirmed_label, issue.confirmed_by = "bug", "maintainer"
        session.flush()
        memory.remember(session, issue, "bug", ENCODER.version, ENCODER.embed([issue.title])[0])
        own_labels.confirm(session, issue, "streaming", "maintainer")
        own_labels.refresh_stored(session, repo.id)  # the feedback queue's refit after a decision
    streaming_issue(sessions, github, 2)
    assert own_decisions(sessions, 2) == [("streaming", "applied", None)]
    assert github.writes()[-1] == ("add_labels", REPO, 2, ("bug", "streaming"))


def test_an_abstained_kind_still_gets_its_own_label_in_one_write(sessions, github):
    confirmed_history(sessions)
    outcome, kind, _ = label(sessions, github, 1, classifier=ENCODER, title="Stream stops", body="")
    assert (outcome, kind) == ("abstained", None)
    assert github.writes() == [("add_labels", REPO, 1, ("streaming",))]


def test_no_own_label_without_confirmed_examples_whatever_its_name(sessions, github):
    confirmed_history(sessions, streaming=0, vision=0)
    label(sessions, github, 1, classifier=ENCODER, title="Speech stream crash", body="")
    assert github.writes() == [("add_labels", REPO, 1, ("bug",))] and own_decisions(sessions) == []


@pytest.mark.parametrize("config,applied", [
    ("areas: [streaming]\n", True), ("areas: ['stream']\n", False), ("areas: ['module:']\n", False),
    ("areas: false\n", False), ("areas: true\n", True), ("allow: [bug]\n", False)])
def test_the_config_narrows_which_labels_may_be_own_labels(sessions, github, config, applied):
    confirmed_history(sessions)
    streaming_issue(sessions, github, config=config)
    assert github.writes() == [("add_labels", REPO, 1, ("bug", "streaming") if applied else ("bug",))]


@pytest.mark.parametrize("config", ["", "mode: label\nmin_examples: 3\n", "areas: false\n"])
def test_without_areas_in_the_config_own_labels_are_never_written_only_suggested(sessions, github, config):
    """Own labels were written by default for every candidate label, and a label the App writes runs the
    repository's `issues: labeled` workflows, decided by text anyone can write: now the config opts in."""
    use_config(github, config)
    confirmed_history(sessions)
    assert streaming_issue(sessions, github)[0] == "applied"
    assert github.writes() == [("add_labels", REPO, 1, ("bug",))]  # the kind only
    suggested = [] if config == "areas: false\n" else [("streaming", "suggested", None)]  # false: not even that
    assert own_decisions(sessions) == suggested
    with session_scope(sessions) as session:  # what the review page lists beside the kind
        rows = review_rows.decisions_page(session, REPO, "all").rows
        assert [(own.label, own.outcome) for row in rows for own in row.own] == [s[:2] for s in suggested]


@pytest.mark.github(labels={REPO: [*REPOSITORY_LABELS, "New Feature"]})
def test_a_label_that_names_a_kind_is_never_an_own_label_even_in_areas(sessions, github):
    """Replayed on a repository nobody tuned for, 87 % of the own labels written were `New Feature`, a kind's
    label written as an area beside the kind's own: a label naming a kind is the kind's."""
    with session_scope(sessions) as session:
        repo = store.ensure_repository(session, REPO, 1)
        for number in range(100, 125):
            issue, _ = store.upsert_issue(session, repo, number, title=f"Stream stops with a crash, case {number}",
                                          body="", author_login="x", state="closed")
            issue.confirmed_label, issue.confirmed_by = "bug", "maintainer"
            session.flush()
            memory.remember(session, issue, "bug", ENCODER.version, ENCODER.embed([issue.title])[0])
            own_labels.confirm(session, issue, "New Feature", "maintainer")
    streaming_issue(sessions, github, config="areas: ['New Feature', 'streaming']\n")
    assert github.writes() == [("add_labels", REPO, 1, ("bug",))] and own_decisions(sessions) == []


def test_an_areas_list_over_the_cap_is_a_config_error_and_turns_own_labels_off(sessions, github):
    too_many = "areas: [" + ", ".join(f"area-{n}" for n in range(51)) + ", streaming]\n"
    config, problems = parse_config(too_many)
    assert config.areas == () and not config.write_own_labels
    assert problems == ["areas lists 52 entries, at most 50: name the areas the App may write, or their common "
                        "prefixes (`area/`); own labels are off until it is fixed"]
    assert parse_config("areas: [" + ", ".join(f"area-{n}" for n in range(50)) + "]\n")[1] == []
    use_config(github, too_many)
    confirmed_history(sessions)
    streaming_issue(sessions, github)
    assert github.writes() == [("add_labels", REPO, 1, ("bug",))] and own_decisions(sessions) == []


def test_an_own_label_is_applied_only_at_the_least_precision_whatever_the_target(sessions, github):
    """A repository's target_precision cannot lower its own labels' below OWN_MIN_PRECISION."""
    lax, _ = parse_config("areas: true\ntarget_precision: 0.5\n")
    policy = labeling.policy_for(labeling.Settings(webhook_secret="s"), lax, dry_run=False)
    assert policy.own_target == labeling.OWN_MIN_PRECISION == 0.85 and policy.write_own_labels
    strict, _ = parse_config("areas: true\ntarget_precision: 0.95\n")
    assert labeling.policy_for(labeling.Settings(webhook_secret="s"), strict, dry_run=False).own_target == 0.95


@pytest.mark.parametrize("mode", ["suggest", "shadow"])
def test_modes_that_write_no_label_write_no_own_label(sessions, github, mode):
    confirmed_history(sessions)
    streaming_issue(sessions, github, config=f"mode: {mode}\nareas: true\n")
    assert not any(call[0] == "add_labels" for call in github.writes())
    assert own_decisions(sessions) == [("streaming", "suggested", None)]
    if mode == "suggest":
        assert "`streaming`" in github.comments(REPO, 1)[0]


def test_comment_mode_names_the_own_labels_it_applied(sessions, github):
    confirmed_history(sessions)
    streaming_issue(sessions, github, config="mode: comment\nareas: true\n")
    assert [call[0] for call in github.writes()] == ["add_labels", "create_comment"]
    assert "Also labelled `streaming`" in github.comments(REPO, 1)[0]


def test_a_resumed_decision_writes_its_own_labels_with_the_kind(sessions, github):
    confirmed_history(sessions)

    class Dies(FakeGitHub):
        def add_labels(self, repo, number, labels):
            raise SystemExit("the worker died before GitHub was written")

    dying = Dies(labels=github.labels, files=github.files)
    with pytest.raises(SystemExit):
        run_job(sessions, dying, 1, classifier=ENCODER, checkpoint=True, title="Stream stops with a crash")
    assert [p.outcome for p in predictions(sessions)] == [labeling.PENDING]
    result = run_job(sessions, github, 1, classifier=FakeEncoder({}), title="Stream stops with a crash")
    assert result.outcome == "applied"
    assert github.writes() == [("add_labels", REPO, 1, ("bug", "streaming"))]


# ---- feedback -------------------------------------------------------------------------------------------

def test_an_own_label_a_maintainer_removes_is_rejected_and_no_example_any_more(sessions, github):
    confirmed_history(sessions)
    streaming_issue(sessions, github)
    assert examples(sessions, 1) == []  # the bot's own label is no example until a human keeps it
    outcome = record(sessions, event("unlabeled", 1, labels=["bug"], label="streaming"))
    assert "rejected" in outcome
    assert own_decisions(sessions) == [("streaming", "applied", "rejected")]


def test_an_own_label_a_maintainer_removed_is_never_put_back_on_that_issue(sessions, github):
    confirmed_history(sessions)
    # the maintainer put it on and took it off before the labelling job ran (a delayed queue)
    record(sessions, event("labeled", 1, labels=["streaming"], label="streaming"))
    record(sessions, event("unlabeled", 1, labels=[], label="streaming"))
    assert examples(sessions, 1) == []
    streaming_issue(sessions, github)
    assert github.writes() == [("add_labels", REPO, 1, ("bug",))] and own_decisions(sessions) == []
    streaming_issue(sessions, github, 2)  # another issue: the label is still the repository's
    assert github.writes()[-1] == ("add_labels", REPO, 2, ("bug", "streaming"))


def test_a_suggestion_a_maintainer_adds_is_accepted_and_becomes_an_example(sessions, github):
    confirmed_history(sessions, streaming=3)
    streaming_issue(sessions, github)
    outcome = record(sessions, event("labeled", 1, labels=["bug", "streaming"], label="streaming"))
    assert "suggestion accepted" in outcome
    assert own_decisions(sessions) == [("streaming", "suggested", "accepted")]
    assert examples(sessions, 1) == ["streaming"]


def test_an_own_label_left_on_at_closing_is_accepted_and_a_replacement_is_an_example(sessions, github):
    confirmed_history(sessions)
    streaming_issue(sessions, github)
    record(sessions, event("closed", 1, labels=["bug", "streaming"]))
    assert own_decisions(sessions) == [("streaming", "applied", "accepted")]
    streaming_issue(sessions, github, 2)  # replaced: streaming off, vision on
    record(sessions, event("unlabeled", 2, labels=["bug"], label="streaming"))
    record(sessions, event("labeled", 2, labels=["bug", "vision"], label="vision"))
    assert own_decisions(sessions, 2) == [("streaming", "applied", "rejected")]
    assert examples(sessions, 1) == ["streaming"] and examples(sessions, 2) == ["vision"]


def test_process_labels_and_kinds_are_no_own_label_examples(sessions, github):
    record(sessions, event("labeled", 1, labels=["good first issue"], label="good first issue"))
    record(sessions, event("labeled", 1, labels=["good first issue", "enhancement"], label="enhancement"))
    assert examples(sessions, 1) == []


# ---- the backfill ---------------------------------------------------------------------------------------

class History(FakeGitHub):
    def list_issues_page(self, repo, page, per_page=100):
        self.calls.append(("list_issues_page", repo, page))
        return self.history if page == 1 else []


def test_the_backfill_keeps_every_label_of_an_issue(sessions):
    github = History()
    github.history = [snapshot(1, title="a", labels=("bug", "streaming", "vision", "good first issue")),
                      snapshot(2, title="b", labels=("streaming", "vision")),  # no kind: still its areas
                      snapshot(3, title="c", labels=("dataset bug",)),  # names a kind: the kind's, no area
                      snapshot(4, title="d", labels=("duplicate", "streaming"))]  # not learnt from
    backfill(sessions, github, REPO, installation_id=1)
    assert examples(sessions, 1) == examples(sessions, 2) == ["streaming", "vision"]
    assert examples(sessions, 3) == []
    with session_scope(sessions) as session:
        rows = {i.number: i.confirmed_label for i in session.scalars(select(IssueRecord))}
    assert rows == {1: "bug", 2: None, 3: "dataset bug"}


# ---- the config -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,areas", [
    ("", None), ("areas: true\n", None), ("areas: false\n", ()), ("areas:\n", ()),
    ("areas: ['module:', streaming]\n", ("module:", "streaming"))])
def test_areas_parse(text, areas):
    config, problems = parse_config(text)
    assert problems == [] and config.areas == areas and config.held is None


@pytest.mark.parametrize("text,problem", [
    ("areas: streaming\n", "areas must be a list of label names or prefixes"),
    ("areas: [1, 2]\n", "areas must be a list"),
    ("areas: ['']\n", "areas must be a list"),
    ("area: [streaming]\n", "did you mean `areas`?"),
    ("min_examples: 0\n", "min_examples must be a whole number from 1 to 10000"),
    ("min_examples: many\n", "min_examples must be a whole number"),
    ("min_examples: true\n", "min_examples must be a whole number")])
def test_bad_areas_or_min_examples_are_named_and_turn_nothing_on(text, problem):
    config, problems = parse_config(text)
    assert len(problems) == 1 and problem in problems[0] and config.held is None
    assert config.areas in ((), None) and config.min_examples == own_labels.DEFAULT_MIN_EXAMPLES
    if text.startswith("areas"):  # a broken list never widens what the maintainer meant: off
        assert config.areas == () and "own labels are off until it is fixed" in problems[0]


def test_a_broken_areas_is_reported_on_the_issue_like_other_config_errors(sessions, github):
    confirmed_history(sessions)
    use_config(github, "mode: comment\nareas: streaming\n")
    run_job(sessions, github, 1, classifier=ENCODER, title="Stream stops with a crash")
    assert ("add_labels", REPO, 1, ("bug",)) in github.writes()
    assert any("areas must be a list" in body for body in github.comments(REPO, 1))


def test_the_policy_carries_areas_and_min_examples():
    config, _ = parse_config("areas: ['module:']\nmin_examples: 7\n")
    policy = labeling.policy_for(labeling.Settings(webhook_secret="s"), config, dry_run=False)
    assert (policy.areas, policy.min_examples) == (("module:",), 7)
    typed, _ = parse_config("apply: type\n")
    assert labeling.policy_for(labeling.Settings(webhook_secret="s"), typed, dry_run=False).areas == ()


# ---- the review page's click on one own label -----------------------------------------------------------

def review_own(sessions, github, choice: str, own: str, number: int = 1) -> str:
    prediction = next(p for p in predictions(sessions) if p.issue_id == stored_issue(sessions, number).id)
    return decide.carry_out(sessions, github, decide.Review(f"r-{choice}-{own}", prediction.id, REPO, number,
                                                            choice, own, "reviewer"))


def test_a_reviewer_accepts_a_suggested_own_label_in_one_click(sessions, github):
    confirmed_history(sessions, streaming=3)
    streaming_issue(sessions, github)
    assert "suggestion accepted" in review_own(sessions, github, "own-accept", "streaming")
    assert github.writes()[-1] == ("add_labels", REPO, 1, ("streaming",))
    assert own_decisions(sessions) == [("streaming", "suggested", "accepted")]
    assert examples(sessions, 1) == ["streaming"]
    assert review_own(sessions, github, "own-reject", "streaming").startswith("refused")  # decided once


def test_a_reviewer_rejects_an_applied_own_label_and_it_comes_off(sessions, github):
    confirmed_history(sessions)
    streaming_issue(sessions, github)
    assert "rejected" in review_own(sessions, github, "own-reject", "streaming")
    assert github.writes()[-1] == ("remove_label", REPO, 1, "streaming")
    assert own_decisions(sessions) == [("streaming", "applied", "rejected")]
    assert review_own(sessions, github, "own-accept", "vision").startswith("refused")  # never decided here


def test_the_quality_page_counts_each_own_labels_precision_and_coverage(sessions, github):
    confirmed_history(sessions)
    streaming_issue(sessions, github, 1)
    streaming_issue(sessions, github, 2)
    label(sessions, github, 3, classifier=ENCODER, title="Image crash", body="")
    record(sessions, event("closed", 1, labels=["bug", "streaming"]))  # kept
    record(sessions, event("unlabeled", 2, labels=["bug"], label="streaming"))  # removed
    # found by a human, not the bot
    record(sessions, event("labeled", 3, labels=["bug", "vision", "streaming"], label="streaming"))
    with session_scope(sessions) as session:
        rows = {row.label: row for row in quality.own_label_quality(session, REPO)}
    streaming = rows["streaming"]
    assert (streaming.applied, streaming.accepted, streaming.rejected) == (2, 1, 1)
    assert streaming.precision == 0.5
    assert (streaming.found, streaming.carried) == (1, 2)  # issue 1 kept it; issue 3 got it from a human


# ---- the memory: issues confirmed with own labels only (no kind) ----------------------------------------

KINDS = ["bug", "feature", "question"]


def own_only_history(sessions, count: int = 6, title: str = "Stream stops with a crash, case {}",
                     labels=("streaming",)):
    """Issues a human confirmed own labels of and no kind (a maintainer's `streaming` on an issue nobody
    gave a kind; the backfill's issues with several own labels and no kind)."""
    with session_scope(sessions) as session:
        repo = store.ensure_repository(session, REPO, 1)
        for number in range(300, 300 + count):
            issue, _ = store.upsert_issue(session, repo, number, title=title.format(number), body="",
                                          author_login="x", state="closed")
            session.flush()
            for name in labels:
                own_labels.confirm(session, issue, name, "maintainer")


def fill(sessions, embedder=ENCODER, size: int = memory.MEMORY_SIZE) -> memory.FillProgress:
    with session_scope(sessions) as session:
        return memory.fill(session, store.find_repository(session, full_name=REPO).id, embedder, size=size)


def memory_labels(sessions) -> dict[int, str]:
    """issue number → the label of its memory row by ENCODER's version."""
    with session_scope(sessions) as session:
        return dict(session.execute(select(IssueRecord.number, MemoryEntry.label)
                                    .join(MemoryEntry, MemoryEntry.issue_id == IssueRecord.id)
                                    .where(MemoryEntry.model_version == ENCODER.version)).all())


def test_the_fill_embeds_issues_confirmed_with_own_labels_only_and_they_vote_for_them(sessions, github):
    """The backfill stores the issues that carry only own labels; the fill once embedded only issues
    with a kind: their examples were counted and never voted, so the label stayed unapplied."""
    enough = own_labels.DEFAULT_MIN_EXAMPLES + 1
    confirmed_history(sessions, streaming=0)  # `vision` on issues of a kind, already in the memory
    own_only_history(sessions, enough)  # `streaming` on issues nobody gave a kind
    assert fill(sessions).describe() == f"{2 * enough} of {2 * enough} issues embedded by {ENCODER.version}"
    rows = memory_labels(sessions)
    own_only = range(300, 300 + enough)
    assert {n: rows[n] for n in own_only} == {n: memory.NO_KIND for n in own_only}
    streaming_issue(sessions, github)
    assert github.writes() == [("add_labels", REPO, 1, ("bug", "streaming"))]
    assert own_decisions(sessions) == [("streaming", "applied", None)]


def test_the_kinds_vote_never_counts_an_issue_of_own_labels_only(sessions, github):
    confirmed_history(sessions)
    label(sessions, github, 1, classifier=ENCODER, title="Stream stops with a crash", body="")
    own_only_history(sessions, 20, title="Stream {} stops with a crash")  # nearer than any issue of a kind
    fill(sessions)
    label(sessions, github, 2, classifier=ENCODER, title="Stream stops with a crash", body="")
    first, second = predictions(sessions)
    assert second.scores == first.scores and second.threshold == first.threshold
    assert second.neighbours == first.neighbours and all(n["number"] < 300 for n in second.neighbours)
    with session_scope(sessions) as session:
        repository_id = store.find_repository(session, full_name=REPO).id
        kind = memory.read_rows(session, repository_id, ENCODER.version).to_memory(KINDS)
        assert len(kind) == 2 * (own_labels.DEFAULT_MIN_EXAMPLES + 1) and set(kind.labels) == {"bug"}


def test_an_own_label_a_maintainer_confirms_on_an_issue_without_kind_gives_it_its_memory_row(sessions):
    """What the feedback job does after each event (bot.decisions.act): the issue's row follows what is
    confirmed."""
    def recorded(data):
        return record(sessions, data, embedder=ENCODER)

    recorded(event("labeled", 1, labels=["streaming"], label="streaming", title="Stream stops"))
    assert memory_labels(sessions) == {1: memory.NO_KIND}
    assert "Stream stops" in ENCODER.embedded[-1]  # its stored text, by the serving version
    recorded(event("labeled", 1, labels=["streaming", "bug"], label="bug", title="Stream stops"))
    assert memory_labels(sessions) == {1: "bug"}  # a kind now: the kind's vote counts it
    recorded(event("unlabeled", 1, labels=["streaming"], label="bug", title="Stream stops"))
    assert memory_labels(sessions) == {1: memory.NO_KIND}
    embedded = len(ENCODER.embedded)
    recorded(event("labeled", 1, labels=["streaming", "vision"], label="vision", title="Stream stops"))
    assert len(ENCODER.embedded) == embedded  # nothing changed for the memory: not embedded again
    recorded(event("unlabeled", 1, labels=["vision"], label="streaming", title="Stream stops"))
    recorded(event("unlabeled", 1, labels=[], label="vision", title="Stream stops"))
    assert memory_labels(sessions) == {}  # nothing confirmed any more: no row


def test_a_reviewers_click_on_an_own_label_of_an_issue_without_kind_gives_it_its_memory_row(sessions, github):
    confirmed_history(sessions)
    assert label(sessions, github, 1, classifier=ENCODER, title="Stream stops", body="")[0] == "abstained"
    prediction = predictions(sessions)[-1]
    outcome = decide.carry_out(sessions, github, decide.Review("r-1", prediction.id, REPO, 1, "own-accept",
                                                               "streaming", "reviewer"), embedder=ENCODER)
    assert "accepted" in outcome and examples(sessions, 1) == ["streaming"]
    assert memory_labels(sessions)[1] == memory.NO_KIND


def test_issues_of_own_labels_only_keep_a_memory_of_their_own_size(sessions):
    """They never push an issue of a kind out of the kind's memory (kind quality stays as it was)."""
    with session_scope(sessions) as session:
        repo = store.ensure_repository(session, REPO, 1)
        for number in range(1, 4):
            store.upsert_issue(session, repo, number, title=f"Crash {number}", body="", author_login="x",
                               state="closed")[0].confirmed_label = "bug"
    own_only_history(sessions, 5)
    assert fill(sessions, size=3).describe() == f"6 of 6 issues embedded by {ENCODER.version}"
    rows = memory_labels(sessions)
    assert sorted(n for n, kind in rows.items() if kind == "bug") == [1, 2, 3]
    assert sorted(n for n, kind in rows.items() if kind == memory.NO_KIND) == [302, 303, 304]  # the newest


def test_the_retention_keeps_the_text_of_an_issue_confirmed_with_own_labels_only(sessions):
    import datetime as dt

    from bot.lifecycle import repositories as lifecycle

    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    with session_scope(sessions) as session:
        repo = store.ensure_repository(session, REPO, 1)
        for number in (1, 2):
            store.upsert_issue(session, repo, number, title=f"Stream {number}", body="b", author_login="a",
                               state="open", event_at=now - dt.timedelta(days=40))
        own_labels.confirm(session, store.find_issue(session, repo, 2), "streaming", "maintainer")
    with session_scope(sessions) as session:
        assert lifecycle.clear_unconfirmed(session, older_than_days=30, now=now) == 1
        issues = session.scalars(select(IssueRecord).order_by(IssueRecord.number))
        assert [(issue.number, issue.title) for issue in issues] == [(1, ""), (2, "Stream 2")]


# ---- comments: a repository's own template names its own labels too --------------------------------------

@pytest.mark.parametrize("mode,said", [("comment", "Sorted as `bug`; areas: `streaming`."),
                                       ("suggest", "Sorted as `bug`; areas: `streaming`.")])
def test_a_comment_template_names_the_own_labels_applied_or_suggested(sessions, github, mode, said):
    """A repository's template said only {label}, {score} and {suggestions}: its comments never mentioned
    the own labels the bot applied (comment mode) or suggested (suggest mode)."""
    confirmed_history(sessions)
    template = 'comment_template: "Sorted as {label}; areas: {own_labels}."'
    streaming_issue(sessions, github, config=f"mode: {mode}\nareas: true\n{template}\n")
    (comment,) = github.comments(REPO, 1)
    assert comment.splitlines()[0] == said  # then the hidden marker of its decision


def test_a_comment_template_says_none_when_no_own_label_fits(sessions, github):
    confirmed_history(sessions, streaming=0, vision=0)
    template = 'comment_template: "{label}; areas: {own_labels}"'
    streaming_issue(sessions, github, config=f"mode: comment\nareas: true\n{template}\n")
    assert [comment.splitlines()[0] for comment in github.comments(REPO, 1)] == ["`bug`; areas: none"]
