"""Which labels can be a repository's own labels (core.own_labels): areas and topics yes, kinds and the
process's labels no, and a kind label that says more than its kind (an area's bugs) yes."""

import pytest

from core.own_labels import candidates, is_candidate


@pytest.mark.parametrize("label", ["dataset request", "dataset-viewer", "streaming", "vision", "module:linear_model",
                                   "area-System.Net", "dataset bug", "area/docs", "generic discussion"])
def test_areas_and_topics_are_candidates(label):
    assert is_candidate(label)


@pytest.mark.parametrize("label", ["bug", "Type: Bug", "kind/feature", "C-bug", "T-docs", "feature-request",
                                   "Bug Report", "documentation", "question", "enhancement",
                                   "documentation improvement", "kind/support"])
def test_labels_that_only_name_a_kind_are_not(label):
    assert not is_candidate(label)


@pytest.mark.parametrize("label", ["good first issue", "help wanted", "needs triage", "needs-repro", "duplicate",
                                   "wontfix", "invalid", "stale", "P1", "priority: high", "dependencies"])
def test_process_labels_are_not(label):
    assert not is_candidate(label)


def test_candidates_keep_their_order_once_each():
    assert candidates(["streaming", "bug", "vision", "streaming", "wontfix"]) == ["streaming", "vision"]
