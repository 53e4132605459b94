"""Which labels can be a repository's own labels (core.own_labels.candidates): areas and topics yes, kinds and
the process's labels no, and a kind label that says more than its kind (an area's bugs) yes."""

import pytest

from core.own_labels import candidates, in_areas, is_candidate


@pytest.mark.parametrize("label", ["dataset request", "dataset-viewer", "streaming", "vision", "module:linear_model",
                                   "area-System.Net", "dataset bug", "area/docs", "generic discussion",
                                   "area-System.Net.Http", "sig/node", "area/kubelet", "module:cluster", "api",
                                   "os-windows", "arch-x64", "tenet-performance", "hardware", "Hardware",
                                   "dataset-preview",
                                   # a process word inside another word is no process label
                                   "area:tensorflow", "workflow", "Component: Flow", "editor-highlight",
                                   "cache-invalidation", "prefixed-names", "wipe", "installer", "sci-kit"])
def test_areas_and_topics_are_candidates(label):
    assert is_candidate(label)


@pytest.mark.parametrize("label", ["bug", "Type: Bug", "kind/feature", "C-bug", "T-docs", "feature-request",
                                   "Bug Report", "documentation", "question", "enhancement",
                                   "documentation improvement", "kind/support"])
def test_labels_that_only_name_a_kind_are_not(label):
    assert not is_candidate(label)


@pytest.mark.parametrize("label", ["good first issue", "good second issue", "good_first_issue", "help wanted", "needs triage", "needs-repro", "duplicate",
                                   "wontfix", "invalid", "stale", "P1", "priority: high", "dependencies",
                                   # large projects' own process labels (dotnet, kubernetes, scikit-learn)
                                   "needs-author-action", "needs-area-label", "untriaged", "no-recent-activity",
                                   "api-ready-for-review", "in-pr", "lifecycle/rotten", "triage/accepted",
                                   "cncf-cla: yes", "Status: In Progress", "Stalled", "Moderate", "Hard",
                                   "Needs Decision", "Waiting for Reviewer", "Sprint",
                                   "low", "priority-low", "High", "Easy", "WIP", "ci", "Closed", "status: fixed"])
def test_process_labels_are_not(label):
    assert not is_candidate(label)


def test_candidates_keep_their_order_once_each():
    assert candidates(["streaming", "bug", "vision", "streaming", "wontfix"]) == ["streaming", "vision"]


@pytest.mark.parametrize("label,areas,taken", [
    ("streaming", None, True), ("streaming", ("streaming",), True), ("streaming", ("stream",), False),
    ("module:linear_model", ("module:",), True), ("area/docs", ("area/*",), True),
    ("area-Net", ("area-",), True),
    ("modules", ("module:",), False), ("streaming", (), False)])
def test_areas_take_names_and_prefixes(label, areas, taken):
    assert in_areas(label, areas) is taken
