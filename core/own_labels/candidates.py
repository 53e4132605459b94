"""Which of a repository's labels can be its own labels: a label is no candidate when it names a kind
(core.kinds) or a step of the process rather than what the issue is about (`good first issue`,
`needs triage`, `duplicate`, `wontfix`, ...): those say what to do with an issue, and a model that learnt
them would learn a maintainer's workload, not the text. The config's `areas` narrow the candidates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from core.kinds import RULES

# Process labels, by the words GitHub's defaults and large projects use for them. Short words are matched
# as whole words: `low` must not take `area:tensorflow` or `workflow`, nor `high` `editor-highlight`.
PROCESS = re.compile(
    r"good[ _-]\w+[ _-]issue|first.timers?|help.wanted|beginner|\beasy\b|hacktoberfest|"
    r"triage|\bneeds?[ _:/-]|awaiting|waiting|blocked|in.progress|\bin.pr\b|\bwip\b|\bstale\b|stalled|"
    r"inactive|no.recent.activity|lifecycle|\bstatus\b|\breview|do.not.merge|\bcla\b|\bsize/|release.note|"
    r"\bsprint\b|\b(moderate|hard|difficulty)\b|"
    r"duplicate|wontfix|won.t.fix|\binvalid\b|not.planned|can.t.reproduce|cannot.reproduce|works.for.me|"
    r"\b(answered|resolved|fixed|closed|released)\b|backport|"
    r"priority|\bp[0-4]\b|severity|critical|\b(high|low|urgent)\b|"
    r"breaking|regression.confirmed|confirmed|accepted|approved|"
    r"dependencies|\bci\b|chore|spam",
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


def in_areas(label: str, areas: Sequence[str] | None) -> bool:
    """Whether the config's `areas` take `label`: None takes every candidate; an entry is a label's name,
    or a prefix when it ends in `:`, `/`, `-`, `_`, `.` or `*` (`module:`, `area-`, `area/*`)."""
    if areas is None:
        return True
    return any(label == area or (area[-1:] in ":/-_.*" and label.startswith(area.rstrip("*")))
               for area in areas)
