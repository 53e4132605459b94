"""Which labels a review adds and removes, and which reviews the worker refuses."""

from __future__ import annotations

import pytest

from bot.review.decide import label_changes


@pytest.mark.parametrize("ours,choice,picked,current,expected", [
    ("bug", "accept", None, (), (["bug"], [])),  # a suggestion accepted: the App puts it on
    ("bug", "accept", None, ("bug",), ([], [])),  # an applied label kept: nothing to write
    ("enhancement", "relabel", "bug", ("enhancement", "wontfix"), (["bug"], ["enhancement"])),
    ("bug", "relabel", "question", (), (["question"], [])),  # a suggestion corrected
    (None, "relabel", "question", (), (["question"], [])),  # an abstention labelled
    ("bug", "reject", None, ("bug", "wontfix"), ([], ["bug"])),  # an applied label taken off
    ("bug", "reject", None, ("wontfix",), ([], [])),  # a suggestion dismissed: nothing to write
])
def test_label_changes(ours, choice, picked, current, expected):
    assert label_changes(ours, choice, picked, current) == expected
