import pytest

from core.kinds import kind_of, kind_of_label, labels_for_kinds


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
