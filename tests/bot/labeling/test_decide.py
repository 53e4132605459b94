import dataclasses
from types import SimpleNamespace

import pytest

from bot.github_api.issues import IssueSnapshot
from bot.labeling.comments import label_comment, suggestion_comment
from bot.labeling.config import parse_config
from bot.labeling.decide import (
    LabelingInputs,
    LabelingPolicy,
    Write,
    choose_label,
    decide,
    policy_for,
    skip_reason,
)
from tests.bot.labeling.commonmark import code_contents, text_outside_code

KINDS3 = ["bug", "feature", "question"]


def issue(**fields):
    base = dict(title="t", body="b", state="open", labels=(), is_pull_request=False, author_login="a")
    return SimpleNamespace(**(base | fields))


@pytest.mark.parametrize("repo_labels,expected", [
    (["bug", "enhancement", "question"], "bug"),
    (["Type: Bug", "Type: Feature Request"], "Type: Bug"),
    (["kind/bug", "kind/feature"], "kind/bug"),
    (["C-bug", "C-enhancement"], "C-bug"),
])
def test_the_predicted_kind_becomes_the_repositorys_own_label(repo_labels, expected):
    choice = choose_label({"bug": 0.8, "feature": 0.1, "question": 0.1}, repo_labels, LabelingPolicy())
    assert (choice.predicted, choice.label) == ("bug", expected)


def test_below_the_threshold_the_bot_abstains_and_says_why():
    choice = choose_label({"bug": 0.4, "feature": 0.35, "question": 0.25}, ["bug"], LabelingPolicy(threshold=0.5))
    assert choice.label is None and "below" in choice.reason


def test_no_label_for_the_kind_means_abstain_unless_creating_labels_is_allowed():
    scores = {"bug": 0.1, "feature": 0.1, "question": 0.8}
    assert choose_label(scores, ["bug", "wontfix"], LabelingPolicy()).label is None
    created = choose_label(scores, ["bug"], LabelingPolicy(create_labels=True))
    assert created.label == "question" and created.create


def test_repository_specific_classes_are_applied_as_they_are():
    choice = choose_label({"area: ui": 0.9, "area: api": 0.1}, ["area: ui", "area: api"], LabelingPolicy())
    assert choice.label == "area: ui"


@pytest.mark.parametrize("fields,reason", [
    ({"is_pull_request": True}, "pull request"),
    ({"state": "closed"}, "closed"),
    ({"labels": ("Type: Bug",)}, "already carries"),
    ({"labels": ("question",)}, "already carries"),
])
def test_issues_that_must_not_be_labelled_are_skipped(fields, reason):
    assert reason in skip_reason(issue(**fields), KINDS3)


def test_unrelated_labels_do_not_stop_labelling():
    assert skip_reason(issue(labels=("good first issue", "area: ui")), KINDS3) is None


# ---- a held repository: its config is broken, so nothing is applied -------------------------------------

HELD = "o/r/.github/issue-sorter.yml is broken, so nothing is applied until it is fixed: allow must be a list"
SCORES = {"bug": 0.9, "feature": 0.05, "question": 0.05}
OPEN = IssueSnapshot(1, "t", "b", "open", (), False, "a", None)


def plan(policy: LabelingPolicy, scores=SCORES, repo_labels=("bug", "enhancement", "question"), **fields):
    """decide() on inputs as the gather step would give them."""
    return decide(LabelingInputs(repo="o/r", number=1, issue=OPEN, policy=policy, classes=list(scores),
                                 scores=dict(scores), repo_labels=list(repo_labels), **fields))


def test_a_held_config_reaches_the_policy(settings):
    config, _ = parse_config("mode: comment\nallow: bug\n", "o/r/.github/issue-sorter.yml")
    policy = policy_for(settings, config, dry_run=False)
    assert policy.held == config.held and policy.held.startswith(HELD) and policy.mode == "comment"


@pytest.mark.parametrize("mode", ["label", "comment", "suggest"])
def test_a_held_repository_gets_no_label_and_no_comment_whatever_its_mode(mode):
    held = plan(LabelingPolicy(mode=mode, held=HELD, create_labels=True))
    assert (held.outcome, held.predicted, held.label, held.reason, held.writes) == ("held", "bug", None, HELD, ())


def test_a_broken_config_is_reported_once_a_day_in_comment_mode_only():
    report = "Issue Sorter ignores these settings of `x`: ..."
    (warning, _, _) = plan(LabelingPolicy(mode="comment"), config_report=report).writes
    assert warning.call == "create_comment" and warning.args[2].endswith(report) and warning.once_key
    assert all(w.call != "create_comment" for w in plan(LabelingPolicy(), config_report=report).writes)


# ---- names in comments are code spans ------------------------------------------------------------------

def test_a_label_name_in_the_comment_of_comment_mode_pings_nobody():
    applied = plan(LabelingPolicy(mode="comment", label_names={"bug": "@org/triage"}), repo_labels=["@org/triage"])
    assert applied.outcome == "applied" and [w.call for w in applied.writes] == ["add_labels", "create_comment"]
    comment = applied.writes[-1].args[-1]
    assert "@org/triage" in code_contents(comment) and "@" not in text_outside_code(comment)


@pytest.mark.parametrize("template", [None, "{label} {score:.0%}\n\n{suggestions}"])
def test_label_names_in_suggestions_and_templates_ping_nobody(template):
    scores = {"@org/team": 0.6, "area: `ui`": 0.3, "@alice": 0.1}  # a repository-specific model's own labels
    comment = suggestion_comment(scores, template)
    assert "@" not in text_outside_code(comment)
    assert set(scores) <= set(code_contents(comment))
    label = label_comment("@org/team", 0.6, scores, template)
    assert "@" not in text_outside_code(label) and "@org/team" in code_contents(label)


def abstained(policy: LabelingPolicy, repo_labels=("bug", "enhancement")):
    """The plan for an issue the model is unsure of: (what the reason adds, the writes)."""
    unsure = plan(dataclasses.replace(policy, threshold=0.95), repo_labels=repo_labels)
    assert unsure.outcome == "abstained"
    return unsure.reason.removeprefix("top score 0.90 (bug) is below 0.95"), unsure.writes


def test_an_abstention_is_marked_only_when_a_label_is_configured():
    assert abstained(LabelingPolicy()) == ("", ())
    reason, writes = abstained(LabelingPolicy(abstain_label="needs-triage"))
    assert reason == "; marked 'needs-triage'"
    assert [(w.call, w.args[1]) for w in writes] == [("create_label", "needs-triage"), ("add_labels", 1)]
    assert writes[1].args[2] == ["needs-triage"]


def test_the_abstention_label_respects_the_allowlist_and_dry_run():
    reason, writes = abstained(LabelingPolicy(abstain_label="needs-triage", allow=("bug",)))
    assert "not in the repository's allowlist" in reason and writes == ()
    assert abstained(LabelingPolicy(abstain_label="needs-triage", dry_run=True))[1] == ()
    _, writes = abstained(LabelingPolicy(abstain_label="triage"), repo_labels=("triage",))
    assert writes == (Write("add_labels", ("o/r", 1, ["triage"])),)  # an existing label is not created again


def test_the_repositorys_abstain_label_overrides_the_apps_and_false_turns_it_off(settings):
    app = dataclasses.replace(settings, abstain_label="needs-triage")
    for text, expected in [("", "needs-triage"), ("abstain_label: triage", "triage"), ("abstain_label: false", None)]:
        policy = policy_for(app, parse_config(text)[0], dry_run=False)
        assert policy.abstain_label == expected
