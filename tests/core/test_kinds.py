"""Which labels name which kind: a repository's labels one by one, and the lesson's rules for an issue's set of
labels (one kind or left out)."""

import pytest

from core.kinds import KINDS, kind_of, kind_of_label, labels_for_kinds


@pytest.mark.parametrize("label,kind", [
    ("bug", "bug"), ("type: bug", "bug"), ("kind/bug", "bug"), ("C-bug", "bug"), ("Type: Bug", "bug"),
    ("crash", "bug"), ("enhancement", "feature"), ("feature-request", "feature"),
    ("Type: Feature Request", "feature"), ("proposal", "feature"), ("question", "question"),
    ("type:support", "question"), ("documentation", "docs"), ("kind/documentation", "docs"), ("docs", "docs"),
    ("good first issue", None), ("duplicate", None), ("T-compiler", None),
])
def test_repository_labels_map_to_kinds(label, kind):
    assert kind_of_label(label) == kind


def test_the_lessons_rules_leave_out_ambiguous_and_skipped_issues():
    assert kind_of(["bug", "enhancement"]) is None  # two kinds: left out
    assert kind_of(["bug", "duplicate"]) is None  # skipped
    assert kind_of(["bug", "good first issue"]) == "bug"


def test_the_plainest_label_of_a_kind_is_chosen():
    assert labels_for_kinds(["bug: ui", "Type: Bug", "bug", "enhancement", "wontfix"]) == {
        "bug": "bug", "feature": "enhancement"}
    assert labels_for_kinds(["C-bug", "C-feature-request", "A-docs"]) == {
        "bug": "C-bug", "feature": "C-feature-request", "docs": "A-docs"}


@pytest.mark.parametrize("labels, kind", [
    (["bug"], "bug"),
    (["Type: Bug"], "bug"),
    (["crash"], "bug"),
    (["Unexpected behaviour"], "bug"),
    (["type:feature"], "feature"),
    (["enhancement"], "feature"),
    (["Feature Request", "P2"], "feature"),
    (["proposal"], "feature"),
    (["question"], "question"),
    (["type:support"], "question"),
    (["docs"], "docs"),
    (["Documentation"], "docs"),
    (["area/doc"], "docs"),
    (["bug", "P1", "regression"], "bug"),
    (["bug", "type:bug"], "bug"),  # two labels, one kind
])
def test_labels_that_point_to_one_kind(labels, kind):
    assert kind_of(labels) == kind


@pytest.mark.parametrize("labels", [
    [],
    ["P1", "needs-triage"],
    ["docker"],  # "doc" only as a word
    ["bugfix"],  # "bug" only as a word
    ["bug", "enhancement"],  # two kinds: left out
    ["not a bug"],
    ["bug", "duplicate"],  # a SKIP label wins over any kind
    ["question-answered"],
    ["Working as intended", "question"],
])
def test_issues_without_a_single_kind_are_left_out(labels):
    assert kind_of(labels) is None


def test_the_four_kinds():
    assert KINDS == ["bug", "feature", "question", "docs"]
