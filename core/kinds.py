"""The four kinds of issue and the seed lesson's rules that map a repository's labels onto them.

`kind_of` is the lesson's function: one kind for a set of labels, or None when the labels say
nothing, disagree, or mark the issue as not worth learning from (duplicate, spam, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

KINDS = ["bug", "feature", "question", "docs"]
RULES = [
    ("docs", r"\bdoc(s|umentation)?\b"),
    ("question", r"\bquestion\b|\bsupport\b"),
    ("feature", r"feature|enhancement|suggestion|proposal|improvement"),
    ("bug", r"\bbug\b|crash|unexpected behaviour"),
]
SKIP = r"not a bug|working as intended|duplicate|spam|question-answered"


def kind_of(labels: Iterable[str]) -> str | None:
    found: set[str] = set()
    for label in labels:
        low = label.lower()
        if re.search(SKIP, low):
            return None
        for name, pattern in RULES:
            if re.search(pattern, low):
                found.add(name)
    return found.pop() if len(found) == 1 else None


def kind_of_label(label: str) -> str | None:
    """The kind one repository label stands for (`C-bug`, `kind/bug`, `Type: Bug` → bug)."""
    return kind_of([label.replace("-", " ").replace("/", " ").replace("_", " ")]) or kind_of([label])


def names_a_kind(label: str) -> bool:
    """Whether any word of `label` names a kind (`New Feature`, `Type: Bug`, `kind/feature`, `enhancement`,
    `dataset bug`): such a label is the kind's to write, never one of a repository's own labels."""
    spaced = label.lower().replace("-", " ").replace("/", " ").replace("_", " ").replace(":", " ")
    return any(re.search(pattern, spaced) or re.search(pattern, label.lower()) for _, pattern in RULES)


def labels_for_kinds(repo_labels: Iterable[str]) -> dict[str, str]:
    """For each kind, the repository's own label for it; the plainest name wins (`bug` over `bug: ui`)."""
    choice: dict[str, str] = {}
    for label in repo_labels:
        kind = kind_of_label(label)
        if kind is not None:  # the kind's own name first, then the shortest, then alphabetical
            choice[kind] = min(choice.get(kind, label), label, key=lambda name: (name.lower() != kind, len(name), name))
    return choice


def is_known_label(label: str, classes: Iterable[str]) -> bool:
    """A label the models can learn from: one of a model's classes, or one that maps to a kind."""
    return label in classes or kind_of_label(label) is not None
