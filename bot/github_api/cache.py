"""What a labelling job need not ask GitHub again: a repository's labels and config files, kept in Redis.

Labels are cached per repository (bounded TTL as a safety net) and dropped by every `label` webhook
(`forget_labels`); a config file is kept with its ETag and read again conditionally, which GitHub answers
304 without counting it against the rate limit. GitHub sends no ETag with a 404, so "no such file" is
believed for a bounded time only.
"""

from __future__ import annotations

import base64
import json

from redis import Redis

from bot.github_api.client import MAX_CONFIG_BYTES, UNCHANGED, RepoFile

LABELS_KEY = "issue-sorter:labels:{}"  # repo → {"generation": n, "labels": [...]}
GENERATION_KEY = "issue-sorter:labels-generation:{}"  # repo → a counter every `label` webhook bumps
FILE_KEY = "issue-sorter:file:{}:{}"  # repo, path → {"sha", "size", "etag", "content"} or {"missing": true}
FILE_SECONDS = 7 * 86400  # a file with an ETag is revalidated on every read; this only bounds Redis memory


def forget_labels(redis: Redis, repo: str) -> None:
    """The repository's labels changed: the next job lists them again (also a list fetched meanwhile)."""
    redis.incr(GENERATION_KEY.format(repo.lower()))


class CachedGitHub:
    """An IssueWriter that answers `list_labels` and `get_file` from Redis while GitHub's answer stands;
    every other call goes straight to the writer it wraps."""

    def __init__(self, github, redis: Redis, *, labels_seconds: int, missing_file_seconds: int):
        self._github, self._redis = github, redis
        self._labels_seconds, self._missing_file_seconds = labels_seconds, missing_file_seconds

    def __getattr__(self, name: str):
        return getattr(self._github, name)

    def list_labels(self, repo: str) -> list[str]:
        """The cached list, unless a `label` webhook came since it was fetched, or it is too old."""
        key, generation_key = LABELS_KEY.format(repo.lower()), GENERATION_KEY.format(repo.lower())
        generation, cached = self._redis.mget(generation_key, key)
        generation = int(generation or 0)
        entry = json.loads(cached) if cached else None
        if entry is not None and entry["generation"] == generation:
            return entry["labels"]
        # The generation read *before* the list: a webhook arriving meanwhile makes this entry stale.
        labels = self._github.list_labels(repo)
        if self._labels_seconds:
            self._redis.set(key, json.dumps({"generation": generation, "labels": labels}), ex=self._labels_seconds)
        return labels

    def create_label(self, repo: str, name: str, color: str, description: str) -> None:
        self._github.create_label(repo, name, color, description)
        forget_labels(self._redis, repo)  # the label webhook will say so too, later

    def get_file(self, repo: str, path: str) -> RepoFile | None:
        """The file as GitHub has it now: a conditional GET when an ETag is held, none while it is missing."""
        key = FILE_KEY.format(repo.lower(), path)
        cached = self._redis.get(key)
        entry = json.loads(cached) if cached else {}
        if entry.get("missing"):
            return None
        held = _file_from(entry) if entry else None
        answer = self._github.get_file(repo, path, etag=held.etag if held else None)
        if answer is UNCHANGED:
            return held
        if answer is None:
            if self._missing_file_seconds:
                self._redis.set(key, json.dumps({"missing": True}), ex=self._missing_file_seconds)
            return None
        if answer.etag:
            self._redis.set(key, json.dumps(_file_json(answer)), ex=FILE_SECONDS)
        return answer


def _file_json(file: RepoFile) -> dict:
    # A file too large to parse is refused unread (bot.labeling.config): its content need not be kept.
    keep = file.content is not None and file.size <= MAX_CONFIG_BYTES
    return {"sha": file.sha, "size": file.size, "etag": file.etag,
            "content": base64.b64encode(file.content).decode() if keep else None}


def _file_from(entry: dict) -> RepoFile:
    content = base64.b64decode(entry["content"]) if entry["content"] is not None else None
    return RepoFile(sha=entry["sha"], size=entry["size"], content=content, etag=entry["etag"])
