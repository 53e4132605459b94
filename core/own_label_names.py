"""A label's own name as evidence for its head (issue 29, core.own_labels' SCORING with `name`): area labels
are mostly named after the words their issues use (`streaming`, `module:linear_model`, `area-System.Net`,
`component: viewer`), so whether those words occur in an issue's title and text are two columns of the
label's head. Computed from the name and the text alone, the same way where the rules are fitted and where
an issue is scored: nothing is stored for them but the heads' two weights.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from core.kinds import RULES

# Words that say how a repository sorts its labels, not what the issues are about (`module:`, `area-`, ...).
PREFIXES = frozenset({"area", "areas", "module", "modules", "component", "components", "comp", "type", "kind",
                      "topic", "scope", "pkg", "package", "lib", "team", "sig", "subsystem", "part", "label"})
STOP = frozenset({"a", "an", "and", "the", "of", "to", "in", "on", "for", "with", "or", "by", "not", "no"})
SUFFIXES = ("ing", "ers", "er", "es", "ed", "s")  # `streaming` finds `stream`, `viewer` finds `views`
NAME_SCALE = 1.0  # the columns' value where every word of the name occurs (the embedding's rows have norm 1)


def name_words(label: str) -> tuple[str, ...]:
    """The words of a label's name that an issue may use, as stems: split on `:`, `-`, `_`, `/`, `.`,
    spaces and camelCase, case-folded, without the process prefixes, kind words and stop words."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", label)
    words = [word for word in re.split(r"[^a-z0-9]+", spaced.lower()) if word]
    kept = [word for word in words if word not in PREFIXES and word not in STOP
            and not any(re.fullmatch(pattern, word) for _, pattern in RULES)]
    return tuple(dict.fromkeys(_stem(word) for word in kept))


def _stem(word: str) -> str:
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[:-len(suffix)]
    return word


def name_columns(label: str, texts: Sequence[str]) -> np.ndarray:
    """(texts, 2): the share of the name's words that begin a word of each text's title (its first line),
    then of the whole text, times NAME_SCALE; zeros where the name has no such word."""
    stems = name_words(label)
    columns = np.zeros((len(texts), 2))
    if not stems:
        return columns
    patterns = [re.compile(rf"(?<![a-z0-9]){re.escape(stem)}") for stem in stems]
    for row, text in enumerate(texts):
        lowered = (text or "").lower()
        title = lowered.split("\n", 1)[0]
        columns[row] = (sum(bool(p.search(title)) for p in patterns),
                        sum(bool(p.search(lowered)) for p in patterns))
    return columns * (NAME_SCALE / len(stems))
