"""What Redis holds of a repository, deleted when the repository is purged.

Its config file's content and ETag, its labels, the permissions of the logins who acted there, the review
page's preview and dry run, the config warnings and command cooldowns, the memory fill's markers and whether
it is public now: each expires on its own (some after days), and a purge must not wait for that.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from redis import Redis

from bot.decisions import commands, memory_fill
from bot.github_api import cache
from bot.labeling import comments
from bot.lifecycle import preview
from core import visibility

log = logging.getLogger(__name__)


def _glob(text: str) -> str:
    """`text` as a literal inside a Redis MATCH pattern."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


def repository_keys(redis: Redis, full_name: str, github_id: int | None) -> set[bytes | str]:
    """Every key in Redis that holds something of this repository, under its name as given and lowercased."""
    from bot.labeling import backtest  # the dry run's whole machinery: imported only when a purge runs

    keys: set[bytes | str] = set()
    for name in {full_name, full_name.lower()}:
        keys |= {cache.LABELS_KEY.format(name), cache.GENERATION_KEY.format(name),
                 preview.PREVIEW_KEY.format(name), backtest.BACKTEST_KEY.format(name)}
        for pattern in (cache.FILE_KEY.format(_glob(name), "*"), cache.PERMISSION_KEY.format(_glob(name), "*"),
                        comments.CONFIG_WARNED_KEY.format(_glob(name), "*"),
                        memory_fill.WAITING_KEY.format(repo=_glob(name), version="*"),
                        memory_fill.SERVED_KEY.format(repo=_glob(name), version="*"),
                        commands.cooldown_key("*", name)):  # every action's: the scope is hashed in the key
            keys |= set(redis.scan_iter(match=pattern, count=1000))
    if github_id is not None:
        keys.add(visibility.KEY.format(github_id))
    return keys


def forget_repositories(redis: Redis, repositories: Iterable[tuple[str, int | None]]) -> int:
    """Delete what Redis holds of these (full name, GitHub id) repositories; returns how many keys went."""
    deleted = 0
    for full_name, github_id in repositories:
        keys = repository_keys(redis, full_name, github_id)
        deleted += redis.delete(*keys) if keys else 0
    log.info("purge: %d Redis keys deleted", deleted)
    return deleted
