"""Pure parsing: (event name, payload) → a typed event the bot handles, or None. No I/O here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import parse_qs

from bot.github_api.issues import IssueSnapshot

MAX_JOB_BODY_CHARS = 20_000  # what travels in the queue; the worker re-reads the issue from GitHub anyway
COMMAND_PREFIX = "/issue-sorter"  # bot.decisions.commands' commands start so (on a comment's first line)
MAX_COMMAND_CHARS = 200  # of that line: all of a comment that a job carries


JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"  # GitHub's other webhook content type: payload=<JSON>


class MalformedPayload(ValueError):
    """The delivery is not a JSON object, or lacks a field its event must have."""


class UnsupportedContentType(ValueError):
    """The delivery is neither JSON nor GitHub's form encoding."""


class _JobArguments:
    """An event's fields as a job's keyword arguments: plain dicts and lists (bot.intake.queueing)."""

    def job_kwargs(self) -> dict[str, Any]:
        # a shallow dict: dataclasses.asdict deep-copies every value, half a millisecond of each delivery
        return _plain({f.name: getattr(self, f.name) for f in fields(self)})


@dataclass(frozen=True)
class IssueEvent(_JobArguments):
    """An `issues` delivery: opened, labeled, unlabeled, edited, closed, transferred, deleted..."""

    delivery_id: str
    action: str
    installation_id: int | None
    repo: str
    number: int
    sender_login: str | None
    sender_is_bot: bool
    snapshot: IssueSnapshot
    label: str | None = None  # the label added or removed (labeled / unlabeled)
    via_app_id: int | None = None  # performed_via_github_app.id, when an App did it
    repo_id: int | None = None  # GitHub's repository id: the repository's identity (names change)
    repo_private: bool | None = None
    received_at: str | None = None  # ISO time the delivery arrived: its time when the issue gives none
    moved_to: dict[str, Any] | None = None  # transferred: {"repo", "repo_id", "private", "number"}

    @classmethod
    def from_job(cls, kwargs: dict[str, Any]) -> IssueEvent:
        """The inverse of `job_kwargs`: the typed event a job's arguments carry (keys it does not know are
        left out, so a job queued by another version still reads)."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in kwargs.items() if key in known and key != "snapshot"},
                   snapshot=IssueSnapshot.from_job(kwargs["snapshot"]))


@dataclass(frozen=True)
class CommentEvent(_JobArguments):
    """An `issue_comment.created` delivery (slash commands)."""

    delivery_id: str
    installation_id: int | None
    repo: str
    number: int
    commenter_login: str
    commenter_is_bot: bool
    body: str  # the comment's first line when it is a command (command_line), else "": never its text
    comment_id: int | None = None  # where a refusal is answered, with a reaction
    # GitHub's author_association of the comment: OWNER, MEMBER or COLLABORATOR may hold a role on the
    # repository; anyone else cannot, so their command is refused without asking GitHub
    commenter_association: str | None = None


@dataclass(frozen=True)
class InstallationEvent(_JobArguments):
    """`installation.*` / `installation_repositories.*`: repositories to backfill, purge, freeze or thaw."""

    delivery_id: str
    action: str  # created | added | deleted | removed | suspend | unsuspend
    installation_id: int
    account_login: str | None
    repos: tuple[str, ...] = field(default_factory=tuple)
    # the same repositories as {"repo", "repo_id", "private"}: GitHub's id and visibility travel with them
    repositories: tuple[dict[str, Any], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class RepositoryEvent(_JobArguments):
    """`repository.renamed / transferred / privatized / publicized`: one repository's name or visibility."""

    delivery_id: str
    action: str
    installation_id: int | None
    repo: str  # the name it has now
    repo_id: int
    private: bool


@dataclass(frozen=True)
class LabelEvent(_JobArguments):
    """A `label` delivery (created, edited, deleted): the repository's set of labels changed."""

    delivery_id: str
    action: str
    installation_id: int | None
    repo: str
    label: str | None  # its name (the new name, for an edit)


Event = IssueEvent | CommentEvent | InstallationEvent | RepositoryEvent | LabelEvent


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    # RQ stores job arguments as JSON (core.queues.SERIALIZER): plain dicts and lists, readable by any version.
    return {k: (_plain(v) if isinstance(v, dict) else list(v) if isinstance(v, tuple)
                else v.to_job() if isinstance(v, IssueSnapshot) else v) for k, v in data.items()}


def decode_body(body: bytes, mimetype: str) -> dict[str, Any]:
    """The payload of a delivery sent as `application/json` (or with no type) or as GitHub's form encoding."""
    if mimetype == FORM_TYPE:
        body = _form_payload(body)
    elif mimetype not in ("", JSON_TYPE):
        raise UnsupportedContentType(f"Content-Type {mimetype!r} is not supported; set the webhook's content "
                                     f"type to {JSON_TYPE} or {FORM_TYPE}")
    try:
        payload = json.loads(body)
    except RecursionError:  # json recurses per nesting level: 100,000 "[" exhaust the stack
        raise MalformedPayload("JSON nested too deeply") from None
    except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
        raise MalformedPayload(f"not JSON ({error})") from None
    if not isinstance(payload, dict):
        raise MalformedPayload("payload is not a JSON object")
    return payload


def _form_payload(body: bytes) -> str:
    try:
        fields = parse_qs(body.decode("ascii"), strict_parsing=True, errors="strict")
    except ValueError as error:  # not ASCII, not key=value pairs, or %-escapes that are not UTF-8
        raise MalformedPayload(f"form body is not URL-encoded ({error})") from None
    values = fields.get("payload", [])
    if len(values) != 1:
        raise MalformedPayload("a form-encoded delivery carries its JSON in one `payload` field")
    return values[0]


# the event names `parse` reads: with "ping", the only names a counter may carry (`event_label`)
PARSED_EVENTS = frozenset({"issues", "issue_comment", "label", "installation", "installation_repositories",
                           "repository"})
COUNTED_EVENTS = PARSED_EVENTS | {"ping"}
INSTALLATION_ACTIONS = {"created", "deleted", "suspend", "unsuspend"}
REPOSITORY_ACTIONS = {"renamed", "transferred", "privatized", "publicized"}


def event_label(header: str | None) -> str:
    """The deliveries counter's name for an X-GitHub-Event header: one of a fixed few, so no sender grows the
    hash (bot.metrics)."""
    return header if header in COUNTED_EVENTS else "other"


def parse(event_name: str, delivery_id: str, payload: dict[str, Any], *,
          received_at: str | None = None) -> Event | None:
    """The typed event, or None when the bot does not handle this event/action.

    `received_at` (ISO 8601) is the delivery's time for events whose payload carries none.
    """
    action = payload.get("action")
    try:
        if event_name == "issues":
            return _parse_issue(delivery_id, action, payload, received_at)
        if event_name == "issue_comment" and action == "created":
            return _parse_comment(delivery_id, payload)
        if event_name == "label" and action in LABEL_ACTIONS:
            return _parse_label(delivery_id, action, payload)
        if event_name == "installation" and action in INSTALLATION_ACTIONS:
            return _parse_installation(delivery_id, action, payload, "repositories")
        if event_name == "installation_repositories" and action in ("added", "removed"):
            return _parse_installation(delivery_id, action, payload, f"repositories_{action}")
        if event_name == "repository" and action in REPOSITORY_ACTIONS:
            return _parse_repository(delivery_id, action, payload)
    except (KeyError, TypeError, AttributeError, ValueError) as error:  # ValueError: "number": "abc"
        raise MalformedPayload(f"{event_name}.{action} payload lacks or mistypes {error}") from error
    return None


LABEL_ACTIONS = {"created", "edited", "deleted"}
ISSUE_ACTIONS = {"opened", "labeled", "unlabeled", "edited", "closed", "reopened", "transferred", "deleted",
                 "typed", "untyped"}


def _parse_issue(delivery_id: str, action: str | None, payload: dict, received_at: str | None) -> IssueEvent | None:
    if action not in ISSUE_ACTIONS:
        return None
    issue, sender, repository = payload["issue"], payload.get("sender") or {}, payload["repository"]
    return IssueEvent(
        delivery_id=delivery_id, action=action,
        installation_id=(payload.get("installation") or {}).get("id"),
        repo=repository["full_name"], number=int(issue["number"]),
        sender_login=sender.get("login"), sender_is_bot=sender.get("type") == "Bot",
        snapshot=IssueSnapshot.from_json(issue, max_body_chars=MAX_JOB_BODY_CHARS),
        # typed / untyped: the issue type set or removed, which feedback treats like a label
        label=(payload.get("label") or payload.get("type") or {}).get("name"),
        via_app_id=(issue.get("performed_via_github_app") or {}).get("id"),
        repo_id=_optional_int(repository.get("id")), repo_private=repository.get("private"),
        received_at=received_at,
        moved_to=_new_place(payload.get("changes") or {}) if action == "transferred" else None,
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _new_place(changes: dict) -> dict[str, Any] | None:
    """Where a transferred issue went (changes.new_repository / new_issue), or None when not said."""
    repository, issue = changes.get("new_repository"), changes.get("new_issue")
    if not (repository and issue):
        return None
    return {"repo": repository["full_name"], "repo_id": _optional_int(repository.get("id")),
            "private": repository.get("private"), "number": int(issue["number"])}


def _parse_repository(delivery_id: str, action: str, payload: dict) -> RepositoryEvent:
    repository = payload["repository"]
    return RepositoryEvent(delivery_id=delivery_id, action=action,
                           installation_id=_optional_int((payload.get("installation") or {}).get("id")),
                           repo=repository["full_name"], repo_id=int(repository["id"]),
                           private=bool(repository.get("private")))


def _parse_label(delivery_id: str, action: str, payload: dict) -> LabelEvent:
    return LabelEvent(delivery_id=delivery_id, action=action,
                      installation_id=(payload.get("installation") or {}).get("id"),
                      repo=payload["repository"]["full_name"], label=(payload.get("label") or {}).get("name"))


def _parse_comment(delivery_id: str, payload: dict) -> CommentEvent:
    comment = payload["comment"]
    user = comment.get("user") or {}
    return CommentEvent(
        delivery_id=delivery_id, installation_id=(payload.get("installation") or {}).get("id"),
        repo=payload["repository"]["full_name"], number=int(payload["issue"]["number"]),
        commenter_login=user.get("login") or "", commenter_is_bot=user.get("type") == "Bot",
        body=command_line(str(comment.get("body") or "")),
        comment_id=int(comment["id"]) if comment.get("id") is not None else None,
        commenter_association=comment.get("author_association"),
    )


def command_line(body: str) -> str:
    """A comment's first line when it is addressed to the App, else "": the rest of a comment is no job's."""
    first = body.strip().split("\n", 1)[0].strip()
    return first[:MAX_COMMAND_CHARS] if first.startswith(COMMAND_PREFIX) else ""


def _parse_installation(delivery_id: str, action: str, payload: dict, key: str) -> InstallationEvent:
    installation = payload["installation"]
    return InstallationEvent(
        delivery_id=delivery_id, action=action, installation_id=int(installation["id"]),
        account_login=(installation.get("account") or {}).get("login"),
        repos=tuple(repo["full_name"] for repo in payload.get(key) or []),
        repositories=tuple({"repo": repo["full_name"], "repo_id": _optional_int(repo.get("id")),
                            "private": repo.get("private")} for repo in payload.get(key) or []),
    )
