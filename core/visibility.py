"""Whether a repository is public now, asked of GitHub before its issues teach a model outside its installation.

The database's `private` is what the last event said; a repository made private since (an App registered
before it subscribed to `repository` events never hears of it) must stop teaching other installations' models
and the global model at once. So shared training asks GitHub, anonymously, as the world would see it: a
repository is public only when GitHub shows it to nobody signed in. An answer is kept in Redis briefly; no
answer (GitHub down, rate-limited) counts as private, and is not kept.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass

import requests
from redis import Redis, RedisError

from core.tables import Repository

log = logging.getLogger(__name__)
KEY = "issue-sorter:public-now:{}"  # + GitHub's repository id (or its name for rows without one): "1" or "0"


@dataclass(frozen=True)
class PublicCheck:
    """Asks GitHub's API at `api_url` which repositories anyone can see now."""

    api_url: str
    redis: Redis | None = None  # where answers are kept; None: asked every time
    cache_seconds: int = 600  # how long an answer is believed
    timeout_seconds: float = 10.0

    def __call__(self, repositories: Iterable[Repository]) -> set[int]:
        """The ids (ours) of those repositories GitHub shows publicly now."""
        return {repository.id for repository in repositories if self.is_public(repository)}

    def is_public(self, repository: Repository) -> bool:
        name = repository.github_id or repository.full_name
        cached = self._cached(name)
        if cached is not None:
            return cached
        path = (f"repositories/{repository.github_id}" if repository.github_id
                else f"repos/{repository.full_name}")
        try:
            answer = requests.get(f"{self.api_url.rstrip('/')}/{path}", timeout=self.timeout_seconds,
                                  headers={"Accept": "application/vnd.github+json"})
        except requests.RequestException as error:
            log.warning("shared training: %s left out: GitHub did not say whether it is public (%s)",
                        repository.full_name, type(error).__name__)
            return False
        if answer.status_code not in (200, 401, 404):  # rate-limited or failing: ask again next time
            log.warning("shared training: %s left out: GitHub answered %s to whether it is public",
                        repository.full_name, answer.status_code)
            return False
        public = answer.status_code == 200 and answer.json().get("private") is False
        if self.redis is not None:
            with contextlib.suppress(RedisError):  # the next training asks again
                self.redis.set(KEY.format(name), "1" if public else "0", ex=self.cache_seconds)
        return public

    def _cached(self, name: int | str) -> bool | None:
        if self.redis is None:
            return None
        try:
            value = self.redis.get(KEY.format(name))
        except RedisError:
            return None
        return None if value is None else value == b"1"