"""The lesson's rules that map a project's own labels to one of four kinds of issue.

Dependency-free on purpose: the bot needs `kind_of` too, and may move this module into `bot/`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

KINDS = ["bug", "feature", "question", "docs"]
# (kind, pattern) checked against each lower-cased label; a label may match several kinds.
RULES = [("docs", r"\bdoc(s|umentation)?\b"), ("question", r"\bquestion\b|\bsupport\b"),
         ("feature", r"feature|enhancement|suggestion|proposal|improvement"),
         ("bug", r"\bbug\b|crash|unexpected behaviour")]
# A label that says the issue is not what it looks like: such issues teach nothing and are left out.
SKIP = r"not a bug|working as intended|duplicate|spam|question-answered"

# The lesson's split of the open-github-issues projects: TEST_REPOS are never trained on.
TRAIN_REPOS = ["python/cpython", "rust-lang/rust", "microsoft/TypeScript",
               "kubernetes/kubernetes", "pingcap/tidb", "swiftlang/swift",
               "ClickHouse/ClickHouse", "golang/go"]
TEST_REPOS = ["moby/moby", "etcd-io/etcd", "facebook/react", "redis/redis", "vuejs/core"]


def kind_of(labels: Iterable[str]) -> str | None:
    """The one kind an issue's labels point to, or None (no kind, several kinds, or a SKIP label)."""
    found = set()
    for label in labels:
        low = label.lower()
        if re.search(SKIP, low):
            return None
        for name, pattern in RULES:
            if re.search(pattern, low):
                found.add(name)
    return found.pop() if len(found) == 1 else None  # one kind, or the issue is left out
