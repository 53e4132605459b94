"""What Redis holds of a repository, deleted when the repository is purged.

Every cache keyed by a repository names it right after its kind, `issue-sorter:<kind>:<owner/name>` or
`issue-sorter:<kind>:<owner/name>:<more>` (its config file's content and ETag, its labels, the permissions of
the logins who acted there, the review page's preview and dry run, the config warnings, the memory fill's
markers), so a purge finds them all, a cache added later included, without each part being named here; and
whether it is public now is keyed by GitHub's id (core.visibility). Each expires on its own, some after days:
a purge does not wait for that.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Iterable

from redis import Redis

from core import visibility

log = logging.getLogger(__name__)
PREFIX = "issue-sorter:"


def _glob(text: str) -> str:
    """`text` as a literal inside a Redis MATCH pattern."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


@dataclasses.dataclass(frozen=True)
class LastReport:
    """A repository's last report of one kind (its `key` formatted with the repository), kept as JSON for
    `ttl` seconds for the review page."""

    key: str
    ttl: int

    def store(self, redis: Redis, result: dict) -> None:
        redis.set(self.key.format(result["repo"]), json.dumps(result), ex=self.ttl)

    def last(self, redis: Redis, repo: str) -> dict | None:
        found = redis.get(self.key.format(repo))
        return json.loads(found) if found else None


def repository_keys(redis: Redis, full_name: str, github_id: int | None) -> set[bytes]:
    """Every key that names this repository (as given or lowercased, as the caches write it) after its kind."""
    keys: set[bytes] = set()
    for name in {full_name, full_name.lower()}:
        for pattern in (f"{PREFIX}*:{_glob(name)}", f"{PREFIX}*:{_glob(name)}:*"):
            for key in redis.scan_iter(match=pattern, count=1000):
                rest = key.decode(errors="replace")[len(PREFIX):].split(":", 1)[-1]
                if rest == name or rest.startswith(name + ":"):  # the name is the key's second part, nothing else
                    keys.add(key)
    if github_id is not None:
        keys.add(visibility.KEY.format(github_id).encode())
    return keys


def forget_repositories(redis: Redis, repositories: Iterable[tuple[str, int | None]]) -> int:
    """Delete what Redis holds of these (full name, GitHub id) repositories; returns how many keys went."""
    deleted = 0
    for full_name, github_id in repositories:
        keys = repository_keys(redis, full_name, github_id)
        deleted += redis.delete(*keys) if keys else 0
    log.info("purge: %d Redis keys deleted", deleted)
    return deleted
