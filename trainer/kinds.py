"""The lesson's label rules, for the trainer, and its split of the hub dataset's projects.

The rules themselves (KINDS, RULES, SKIP, kind_of) live in bot.kinds, which the bot shares; they are
re-exported here so the hub loader and the bot cannot drift apart.
"""

from __future__ import annotations

from bot.kinds import KINDS, RULES, SKIP, kind_of

__all__ = ["KINDS", "RULES", "SKIP", "TEST_REPOS", "TRAIN_REPOS", "kind_of"]

# The lesson's split of the open-github-issues projects: TEST_REPOS are never trained on.
TRAIN_REPOS = ["python/cpython", "rust-lang/rust", "microsoft/TypeScript",
               "kubernetes/kubernetes", "pingcap/tidb", "swiftlang/swift",
               "ClickHouse/ClickHouse", "golang/go"]
TEST_REPOS = ["moby/moby", "etcd-io/etcd", "facebook/react", "redis/redis", "vuejs/core"]
