"""Who may review what: repositories where the App is installed and the user has at least triage.

GitHub answers for the user's own token; the answer is kept in Redis for ACCESS_TTL seconds, so a
permission taken away on GitHub stops working here within minutes. The user's token never reaches the
browser: the signed cookie holds a random session id, and Redis holds the token under it.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass

from redis import Redis

from bot.review.github_user import UserClient

ACCESS_TTL = 300  # seconds a user's repository permissions are trusted before GitHub is asked again
SESSION_TTL = 8 * 3600  # seconds a sign-in lasts: the lifetime of GitHub's user token for an App
ROLES = ("admin", "maintain", "push", "triage", "pull")  # GitHub's permission keys, strongest first
REVIEW_ROLES = frozenset({"admin", "maintain", "push", "triage"})  # who may review: triage and above
_PREFIX = "issue-sorter:review"


@dataclass(frozen=True)
class Reviewer:
    """A signed-in user, as stored server-side under their session id."""

    sid: str
    login: str
    token: str
    user_id: int | None = None  # GitHub's id of the account: logins change hands (bot.review.admins)


@dataclass(frozen=True)
class RepositoryAccess:
    full_name: str
    installation_id: int
    role: str  # the strongest of ROLES the user has


def role_of(permissions: dict[str, bool] | None) -> str:
    """The strongest permission GitHub reports in a repository's `permissions` object ("none" without one)."""
    return next((role for role in ROLES if (permissions or {}).get(role)), "none")


def reviewable(installations: list[tuple[int, list[dict]]]) -> dict[str, RepositoryAccess]:
    """Repositories the user may review, from (installation id, its repositories as GitHub lists them)."""
    found = {}
    for installation_id, repositories in installations:
        for repo in repositories:
            role = role_of(repo.get("permissions"))
            if role in REVIEW_ROLES:
                found[repo["full_name"]] = RepositoryAccess(repo["full_name"], installation_id, role)
    return found


def ask_github(client: UserClient) -> dict[str, RepositoryAccess]:
    """Every repository the user may review, asked of GitHub with their token."""
    return reviewable([(installation["id"], client.installation_repositories(installation["id"]))
                       for installation in client.installations()])


class ReviewStore:
    """Server-side sign-ins and their cached permissions, in Redis, each with its TTL."""

    def __init__(self, redis: Redis):
        self._redis = redis

    def sign_in(self, login: str, token: str, user_id: int | None = None) -> Reviewer:
        reviewer = Reviewer(secrets.token_urlsafe(32), login, token, user_id)
        self._redis.set(f"{_PREFIX}:session:{reviewer.sid}", json.dumps(asdict(reviewer)), ex=SESSION_TTL)
        return reviewer

    def reviewer(self, sid: str | None) -> Reviewer | None:
        raw = self._redis.get(f"{_PREFIX}:session:{sid}") if sid else None
        return Reviewer(**json.loads(raw)) if raw else None

    def sign_out(self, sid: str) -> None:
        self._redis.delete(f"{_PREFIX}:session:{sid}", f"{_PREFIX}:access:{sid}", f"{_PREFIX}:labels:{sid}")

    def access(self, reviewer: Reviewer, client: UserClient) -> dict[str, RepositoryAccess]:
        """The reviewer's repositories: from the cache, else from GitHub (then cached for ACCESS_TTL)."""
        key = f"{_PREFIX}:access:{reviewer.sid}"
        raw = self._redis.get(key)
        if raw is not None:
            return {name: RepositoryAccess(**entry) for name, entry in json.loads(raw).items()}
        found = ask_github(client)
        entries = {name: asdict(entry) for name, entry in found.items()}
        self._redis.set(key, json.dumps(entries), ex=ACCESS_TTL)
        return found

    def labels(self, reviewer: Reviewer, client: UserClient, repo: str) -> list[str]:
        """The repository's labels, for the "pick another label" list; cached like the permissions."""
        key = f"{_PREFIX}:labels:{reviewer.sid}"
        cached = self._redis.hget(key, repo)
        if cached is not None:
            return json.loads(cached)
        labels = client.labels(repo)
        self._redis.hset(key, repo, json.dumps(labels))
        self._redis.expire(key, ACCESS_TTL, nx=True)
        return labels
