"""Which labels can be a repository's own labels (core.own_labels.candidates): areas and topics yes, kinds and
the process's labels no: a label that names a kind is the kind's, whatever else it says (`New Feature`)."""

import dataclasses

import pytest

from core.own_labels import candidates, in_areas, is_candidate
from core.own_labels.candidates import compile_areas


@pytest.mark.parametrize("label", ["dataset request", "dataset-viewer", "streaming", "vision", "module:linear_model",
                                   "area-System.Net", "generic discussion",
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
                                   "documentation improvement", "kind/support",
                                   # a label that names a kind beside other words is still the kind's
                                   "New Feature", "new feature", "Type: Feature Request", "dataset bug",
                                   "area/docs", "Enhancement :sparkles:", "bug: ui", "kind/crash"])
def test_labels_that_name_a_kind_are_not(label):
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


class CountingSet(frozenset):
    """A frozenset that counts the lookups made in it."""

    lookups = 0

    def __contains__(self, item):
        CountingSet.lookups += 1
        return super().__contains__(item)


def lookups_to_match(label: str, n_areas: int) -> tuple[bool, int]:
    """(taken, set lookups) for `label` against `n_areas` names and as many prefixes (beyond the config's
    cap on purpose: the matcher's cost must not depend on it)."""
    compiled = compile_areas(tuple(f"topic-{i:05d}" for i in range(n_areas))
                             + tuple(f"area-{i:05d}:" for i in range(n_areas)))
    counting = dataclasses.replace(compiled, names=CountingSet(compiled.names),
                                   prefixes=CountingSet(compiled.prefixes))
    CountingSet.lookups = 0
    return counting.takes(label), CountingSet.lookups


@pytest.mark.parametrize("label", ["area-00007:io", "topic-00003", "unrelated", "area-99999:x"])
def test_matching_a_label_costs_the_same_for_ten_areas_as_for_ten_thousand(label):
    """7,000 prefixes against 5,000 labels cost 6.3 s of a shared worker per issue when each label was tried
    against each prefix: the compiled areas look a label up once per prefix length, whatever their number."""
    few, many = lookups_to_match(label, 10), lookups_to_match(label, 10_000)
    assert few[1] == many[1] <= 2
    assert many[0] == (label in ("area-00007:io", "topic-00003"))


def test_compiled_areas_take_what_the_names_and_prefixes_take():
    compiled = compile_areas(("streaming", "module:", "area/*", "area-", "*x"))
    assert [compiled.takes(label) for label in ("streaming", "module:io", "area/ui", "area-Net", "streams",
                                                "modules")] == [True, True, True, True, False, False]
