from types import SimpleNamespace

import pytest

from bot.labeling import LabelingPolicy, choose_label, skip_reason

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
