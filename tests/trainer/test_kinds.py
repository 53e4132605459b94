"""The lesson's label rules, case by case."""

import pytest

from core.kinds import KINDS, kind_of
from trainer.dataset import TEST_REPOS, TRAIN_REPOS


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


def test_kinds_and_the_lesson_split():
    assert KINDS == ["bug", "feature", "question", "docs"]
    assert len(TRAIN_REPOS) == 8 and len(TEST_REPOS) == 5
    assert not set(TRAIN_REPOS) & set(TEST_REPOS)
