"""Fakes for our own interfaces (bedevere's FakeGH habit): plain recording classes, no Redis, torch or HTTP.

`FakeClassifier` gives deterministic scores; `FakeGitHub` is an in-memory `IssueWriter` that records
every call. The integration tests keep the real encoder and the fake GitHub over real HTTP
(simulation.fake_github); these are for the rules, in milliseconds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.github_api.client import RepoFile
from bot.github_api.issues import IssueSnapshot
from core.card import ModelCard


class FakeClassifier:
    """Scores by keyword: the first rule whose word is in the text wins with `confidence`, the rest share
    what is left; no rule matching gives every class the same score."""

    def __init__(self, rules: Mapping[str, str], labels: Sequence[str] = ("bug", "feature", "question"), *,
                 confidence: float = 0.9, version: str = "fake-1", thresholds: dict[str, float] | None = None):
        self.rules, self.labels, self.confidence, self.version = dict(rules), list(labels), confidence, version
        self.card = ModelCard(version=version, labels=self.labels, thresholds=thresholds)
        self.seen: list[str] = []  # every text it was asked about

    def predict(self, texts: Sequence[str]) -> list[dict[str, float]]:
        self.seen.extend(texts)
        return [self._scores(text) for text in texts]

    def _scores(self, text: str) -> dict[str, float]:
        winner = next((label for word, label in self.rules.items() if word in text.lower()), None)
        if winner is None:
            return {label: 1 / len(self.labels) for label in self.labels}
        rest = (1 - self.confidence) / (len(self.labels) - 1)
        return {label: self.confidence if label == winner else rest for label in self.labels}


class FakeEncoder(FakeClassifier):
    """A FakeClassifier that embeds as an encoder does (a vector from each text's hash); `embedded` records
    every text it embedded, and with `fail_after` it raises once it has embedded that many (a crash)."""

    def __init__(self, *args, fail_after: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.embedded: list[str] = []
        self.fail_after = fail_after

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail_after is not None and len(self.embedded) + len(texts) > self.fail_after:
            raise RuntimeError("the worker died while embedding")
        self.embedded.extend(texts)
        return [[byte / 255 for byte in hashlib.sha256(text.encode()).digest()[:8]] for text in texts]

    def predict_and_embed(self, texts: Sequence[str]) -> tuple[list[dict[str, float]], list[list[float]]]:
        vectors = self.embed(texts)
        return self.predict(texts), vectors


@dataclass
class FakeGitHub:
    """An in-memory `bot.github_api.client.IssueWriter` for one installation; `calls` records each one."""

    labels: dict[str, list[str]] = field(default_factory=dict)  # repo → its labels
    issue_labels: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    files: dict[tuple[str, str], str] = field(default_factory=dict)  # (repo, path) → text
    permissions: dict[tuple[str, str], str] = field(default_factory=dict)  # (repo, login) → role
    issue_types: dict[str, list[str]] = field(default_factory=dict)  # repo → its organisation's types
    calls: list[tuple] = field(default_factory=list)
    issues: dict[tuple[str, int], IssueSnapshot] = field(default_factory=dict)  # GitHub's copy of an issue

    def writes(self) -> list[tuple]:
        """The calls that change something on GitHub."""
        return [call for call in self.calls if call[0] in ("add_labels", "remove_label", "create_label",
                                                            "create_comment", "set_issue_type")]

    def comments(self, repo: str, number: int) -> list[str]:
        """The bodies of the comments written on one issue, in order."""
        return [call[3] for call in self.calls if call[:3] == ("create_comment", repo, number)]

    def issue_type(self, repo: str, number: int) -> str | None:
        """The issue type last set on one issue, if any."""
        types = [call[3] for call in self.calls if call[:3] == ("set_issue_type", repo, number)]
        return types[-1] if types else None

    def get_issue(self, repo: str, number: int) -> IssueSnapshot:
        self.calls.append(("get_issue", repo, number))
        if (repo, number) in self.issues:
            return self.issues[(repo, number)]
        return IssueSnapshot(number, "", "", "open", tuple(self.issue_labels.get((repo, number), ())), False,
                             None, None)

    def list_labels(self, repo: str) -> list[str]:
        self.calls.append(("list_labels", repo))
        return list(self.labels.get(repo, []))

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> list[str]:
        self.calls.append(("add_labels", repo, number, tuple(labels)))
        self.issue_labels.setdefault((repo, number), []).extend(labels)
        return list(self.issue_labels[(repo, number)])  # GitHub answers with the issue's labels

    def remove_label(self, repo: str, number: int, label: str) -> None:
        self.calls.append(("remove_label", repo, number, label))
        self.issue_labels.get((repo, number), []).remove(label)

    def create_label(self, repo: str, name: str, color: str, description: str) -> None:
        self.calls.append(("create_label", repo, name))
        self.labels.setdefault(repo, []).append(name)

    def create_comment(self, repo: str, number: int, body: str) -> None:
        self.calls.append(("create_comment", repo, number, body))

    def list_comments(self, repo: str, number: int) -> list[str]:
        bodies = self.comments(repo, number)  # before this call is recorded
        self.calls.append(("list_comments", repo, number))
        return bodies

    def list_issue_types(self, repo: str) -> list[str]:
        self.calls.append(("list_issue_types", repo))
        return list(self.issue_types.get(repo, []))

    def set_issue_type(self, repo: str, number: int, issue_type: str) -> None:
        self.calls.append(("set_issue_type", repo, number, issue_type))

    def react_to_comment(self, repo: str, comment_id: int, content: str) -> None:
        self.calls.append(("react_to_comment", repo, comment_id, content))

    def get_permission(self, repo: str, login: str) -> str:
        self.calls.append(("get_permission", repo, login))
        return self.permissions.get((repo, login), "none")

    def get_file(self, repo: str, path: str, *, etag: str | None = None) -> RepoFile | None:
        self.calls.append(("get_file", repo, path))
        text = self.files.get((repo, path))
        if text is None:
            return None
        data = text.encode()
        return RepoFile(hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(), len(data), data)

    def list_issues_page(self, repo: str, page: int, per_page: int = 100) -> list[IssueSnapshot]:
        self.calls.append(("list_issues_page", repo, page))
        return []
