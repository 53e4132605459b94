"""Which labels can be a repository's own labels (core.own_labels): areas and topics yes, kinds and the
process's labels no, and a kind label that says more than its kind (an area's bugs) yes."""

import numpy as np
import pytest

from core.own_labels import OwnLabelMemory, candidates, in_areas, is_candidate


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


@pytest.mark.parametrize("label,areas,taken", [
    ("streaming", None, True), ("streaming", ("streaming",), True), ("streaming", ("stream",), False),
    ("module:linear_model", ("module:",), True), ("area/docs", ("area/*",), True),
    ("area-Net", ("area-",), True),
    ("modules", ("module:",), False), ("streaming", (), False)])
def test_areas_take_names_and_prefixes(label, areas, taken):
    assert in_areas(label, areas) is taken


def test_a_label_is_scored_by_the_confirmed_issues_that_carry_it_and_served_from_min_examples():
    near, far = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    memory = OwnLabelMemory(np.stack([near] * 6 + [far] * 6).astype(np.float32),
                            [frozenset({"streaming"})] * 6 + [frozenset({"vision"})] * 6,
                            {"streaming": 6, "vision": 6})
    streaming, vision = memory.score(near, ["streaming", "vision"], min_examples=5, target=0.85)
    assert streaming.score == 1.0 and streaming.threshold is not None
    assert streaming.score >= streaming.threshold
    assert vision.score == 0.0
    (unserved,) = memory.score(near, ["streaming"], min_examples=7, target=0.85)
    assert unserved.threshold is None and unserved.examples == 6
