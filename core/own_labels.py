"""Which of a repository's labels can be its *own* labels beside the kind (issue 29): areas, components,
topics (`module:linear_model`, `streaming`, `dataset-viewer`). A label is no candidate when it names a kind
(core.kinds) or a step of the process rather than what the issue is about (`good first issue`,
`needs triage`, `duplicate`, `wontfix`, ...): those say what to do with an issue, and a model that learnt
them would learn a maintainer's workload, not the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from core.kinds import RULES

# Process labels, by the words GitHub's defaults and large projects use for them.
PROCESS = re.compile(
    r"good.first.issue|first.timers?|help.wanted|beginner|easy|hacktoberfest|"
    r"triage|needs?.(info|more|repro|review|investigation|decision|discussion|feedback|response)|"
    r"awaiting|waiting|blocked|in.progress|wip|stale|inactive|"
    r"duplicate|wontfix|won.t.fix|invalid|not.planned|can.t.reproduce|cannot.reproduce|works.for.me|"
    r"answered|resolved|fixed|closed|released|backport|"
    r"priority|\bp[0-4]\b|severity|critical|high|low|urgent|"
    r"breaking|regression.confirmed|confirmed|accepted|approved|"
    r"dependencies|ci\b|chore|spam",
    re.IGNORECASE)


# What a kind label may hold beside its kind's word: `Type: Bug`, `kind/feature`, `C-bug`, `Bug Report`.
KIND_FILLERS = re.compile(r"\b(type|kind|category|issue|is|c|t|request|report|reports|change)\b")


def is_candidate(label: str) -> bool:
    """Whether `label` may be one of the repository's own labels: no process label, and no kind label
    unless it says more than its kind (`dataset bug` is an area's bugs; `Type: Bug` only the kind)."""
    if PROCESS.search(label):
        return False
    return bool(re.search(r"[a-z0-9]", _without_kind_words(label.lower())))


def _without_kind_words(label: str) -> str:
    label = re.sub(r"[-/_:.]", " ", label)
    for _, pattern in RULES:
        label = re.sub(pattern, " ", label)
    return KIND_FILLERS.sub(" ", label)


def candidates(labels: Iterable[str]) -> list[str]:
    """The candidates among `labels`, in their order, each once."""
    return list(dict.fromkeys(label for label in labels if is_candidate(label)))
