"""Which of a repository's labels can be its own labels: a label is no candidate when it names a kind
(core.kinds: `New Feature`, `Type: Bug`, `kind/feature`, `dataset bug` are the kind's) or a step of the
process rather than what the issue is about (`good first issue`, `needs triage`, `duplicate`, `wontfix`,
...): those say what to do with an issue, and a model that learnt them would learn a maintainer's workload,
not the text. The config's `areas` narrow the candidates, matched in time independent of how many there are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.kinds import names_a_kind

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
PREFIX_ENDS = ":/-_.*"  # an `areas` entry ending in one of these is a prefix (`module:`, `area-`, `area/*`)
MAX_AREAS = 50  # entries of a config's `areas`: more is a config error (a broken `areas` turns own labels off)
MAX_OWN_LABELS = 100  # candidates the areas take that one issue is scored on, in the repository's label order


def is_candidate(label: str) -> bool:
    """Whether `label` may be one of the repository's own labels: no process label, and none that names a
    kind (core.kinds.names_a_kind: a kind's label is written as the kind, never beside it as an area)."""
    return not PROCESS.search(label) and not names_a_kind(label) and bool(re.search(r"[a-zA-Z0-9]", label))


def candidates(labels: Iterable[str]) -> list[str]:
    """The candidates among `labels`, in their order, each once."""
    return list(dict.fromkeys(label for label in labels if is_candidate(label)))


@dataclass(frozen=True)
class Areas:
    """A config's `areas`, compiled: exact names in a set, prefixes in a set with their lengths, so a label is
    matched with at most one lookup per prefix length (at most 50: labels are that long) however many there are."""

    names: frozenset[str]
    prefixes: frozenset[str]
    lengths: tuple[int, ...]  # the prefixes' distinct lengths

    def takes(self, label: str) -> bool:
        return label in self.names or any(label[:n] in self.prefixes for n in self.lengths if n <= len(label))


@functools.lru_cache(maxsize=256)
def compile_areas(areas: tuple[str, ...]) -> Areas:
    """The matcher of a config's `areas` (cached: one config's tuple is compiled once per process)."""
    prefixes = frozenset(area.rstrip("*") for area in areas if area[-1:] in PREFIX_ENDS)
    return Areas(frozenset(areas), prefixes, tuple(sorted({len(prefix) for prefix in prefixes})))


def in_areas(label: str, areas: Sequence[str] | None) -> bool:
    """Whether the config's `areas` take `label`: None takes every candidate; an entry is a label's name,
    or a prefix when it ends in `:`, `/`, `-`, `_`, `.` or `*` (`module:`, `area-`, `area/*`)."""
    return areas is None or compile_areas(tuple(areas)).takes(label)
