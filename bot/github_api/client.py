"""The GitHub adapter: our `IssueWriter` calls over PyGithub, with every failure sorted into retry or drop."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qs, quote, urlparse

import jwt
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from github import Auth, Github, GithubException, GithubIntegration
from github.Repository import Repository

from bot.github_api.issues import IssueSnapshot
from core.settings import Settings

T = TypeVar("T")
SECONDARY_RATE_LIMIT_WAIT = 60.0  # seconds; GitHub's advice when a rate limit names no reset time
# No answer, or half of one: the network or GitHub's front end, worth another try later.
TRANSIENT_REQUEST_ERRORS = (requests.ConnectionError, requests.Timeout,
                            requests.exceptions.ChunkedEncodingError)


class GitHubError(Exception):
    """A GitHub call failed; `status` is the HTTP status, None when no response came back."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


class TransientGitHubError(GitHubError):
    """Worth retrying: 5xx, network trouble or a rate limit. `retry_after` is seconds to wait, when known."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message, status=status)
        self.retry_after = retry_after


class PermanentGitHubError(GitHubError):
    """Retrying cannot help (401, a missing permission, 404, 410, 422): record and drop."""


BASE_ROLES = ("admin", "maintain", "write", "triage", "read")  # GitHub's repository roles, strongest first
TRIAGE_ROLES = frozenset({"admin", "maintain", "write", "triage"})  # may label and close others' issues
# a collaborator's `permissions` object, key → the base role it grants, strongest first
PERMISSION_ROLES = (("admin", "admin"), ("maintain", "maintain"), ("push", "write"), ("triage", "triage"),
                    ("pull", "read"))


def role_of(answer: Mapping[str, Any]) -> str:
    """The role in GitHub's answer to `GET /repos/{repo}/collaborators/{login}/permission`. An organisation's
    custom role answers with its own name: it reads as the strongest base role its permissions grant."""
    role = answer.get("role_name") or answer.get("permission") or "none"
    if role in BASE_ROLES or role == "none":
        return role
    permissions = (answer.get("user") or {}).get("permissions") or {}
    return next((base for key, base in PERMISSION_ROLES if permissions.get(key)), "none")


MAX_CONFIG_BYTES = 64 * 1024  # the config file's cap: real files are a few hundred bytes; every parse stays quick


@dataclasses.dataclass(frozen=True)
class RepoFile:
    """A file on the default branch, equal and hashed by its blob SHA alone (the same SHA, the same bytes)."""

    sha: str
    size: int = dataclasses.field(compare=False)  # bytes
    content: bytes | None = dataclasses.field(compare=False, repr=False)  # None: GitHub sends none over 1 MB
    etag: str | None = dataclasses.field(default=None, compare=False)  # for a conditional GET next time


class Unchanged:
    """GitHub answered 304 Not Modified to a conditional GET: what the caller holds is current."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = Unchanged()


class IssueWriter(Protocol):
    """What the labeling code needs from GitHub, one installation at a time; repos are "owner/name"."""

    def get_issue(self, repo: str, number: int) -> IssueSnapshot: ...

    def list_labels(self, repo: str) -> list[str]: ...

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> list[str] | None: ...

    def remove_label(self, repo: str, number: int, label: str) -> None: ...

    def create_label(self, repo: str, name: str, color: str, description: str) -> None: ...

    def create_comment(self, repo: str, number: int, body: str) -> None: ...

    def list_comments(self, repo: str, number: int) -> list[str]: ...

    def list_issue_types(self, repo: str) -> list[str]: ...

    def set_issue_type(self, repo: str, number: int, issue_type: str) -> None: ...

    def react_to_comment(self, repo: str, comment_id: int, content: str) -> None: ...

    def get_permission(self, repo: str, login: str) -> str: ...

    def get_file(self, repo: str, path: str, *, etag: str | None = None) -> RepoFile | Unchanged | None: ...

    def list_issues_page(self, repo: str, page: int, per_page: int = 100) -> list[IssueSnapshot]: ...


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds GitHub asks us to wait: Retry-After, else until X-RateLimit-Reset when none are left."""
    try:
        if "retry-after" in headers:
            return max(0.0, float(headers["retry-after"]))
        if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
            return max(0.0, float(headers["x-ratelimit-reset"]) - time.time())
    except ValueError:  # an HTTP-date Retry-After, which GitHub does not send today
        pass
    return None


def _next_cursor(headers: Mapping[str, str]) -> str | None:
    """The `cursor` of the Link header's rel="next" URL: how GitHub pages the App's deliveries."""
    link = {key.lower(): value for key, value in headers.items()}.get("link", "")
    for entry in requests.utils.parse_header_links(link) if link else ():
        if entry.get("rel") == "next":
            return (parse_qs(urlparse(entry["url"]).query).get("cursor") or [None])[0]
    return None


def _is_rate_limited(status: int, headers: Mapping[str, str], message: str) -> bool:
    # GitHub answers a rate limit with 403 or 429; the headers are the documented signal, the
    # message the fallback for secondary limits that send neither header.
    if status == 429:
        return True
    hinted = headers.get("x-ratelimit-remaining") == "0" or "retry-after" in headers
    return status == 403 and (hinted or "rate limit" in message.lower())


def _translate(error: GithubException) -> GitHubError:
    """Map one PyGithub exception onto our two kinds."""
    headers = {key.lower(): value for key, value in (error.headers or {}).items()}
    message = error.message or (error.data.get("message") if isinstance(error.data, dict) else None) or ""
    text = f"GitHub answered {error.status}: {message}".rstrip(": ")
    if error.status is not None and error.status >= 500:
        return TransientGitHubError(text, status=error.status, retry_after=_retry_after(headers))
    if _is_rate_limited(error.status, headers, message):
        wait = _retry_after(headers)
        return TransientGitHubError(text, status=error.status,
                                    retry_after=SECONDARY_RATE_LIMIT_WAIT if wait is None else wait)
    return PermanentGitHubError(text, status=error.status)


@contextlib.contextmanager
def _github_errors() -> Iterator[None]:
    """Turn PyGithub and requests exceptions into GitHubError subclasses; nothing else is caught."""
    try:
        yield
    except GithubException as error:
        raise _translate(error) from error
    except TRANSIENT_REQUEST_ERRORS as error:
        raise TransientGitHubError(f"no answer from GitHub: {type(error).__name__}") from error


def _unless(statuses: tuple[int, ...], answer: T, request: Callable[[], T]) -> T:
    """`request()`, or `answer` where GitHub's permanent error has one of `statuses` (a 404 that means none)."""
    try:
        return request()
    except PermanentGitHubError as error:
        if error.status in statuses:
            return answer
        raise


class NotAFile(PermanentGitHubError):
    """The path names a folder, a symlink or a submodule, not a file: a config there cannot be read."""

    def __init__(self, path: str, kind: str):
        super().__init__(f"{path} is a {kind}, not a file", status=200)
        self.kind = kind


class IssueTransferred(PermanentGitHubError):
    """GitHub redirected the issue's URL (301) to an issue of another repository: it was transferred
    (or, rarely, its repository was renamed while the job waited; the next delivery carries the new name)."""


class PyGithubWriter:
    """`IssueWriter` over one `github.Github` client, usually authenticated as one installation.

    `renew` builds a fresh client (a new installation token): GitHub answering 401 mid-job means the
    token ran out or was revoked before PyGithub expected, so the call is renewed once and tried again.
    """

    def __init__(self, github: Github, renew: Callable[[], Github] | None = None):
        self._github = github
        self._renew = renew

    def _call(self, request: Callable[[], T]) -> T:
        """`request()` with GitHub's errors translated; one token renewal on 401, then 401 is permanent."""
        try:
            with _github_errors():
                return request()
        except PermanentGitHubError as error:
            if error.status != 401 or self._renew is None:
                raise
        self._github = self._renew()
        with _github_errors():
            return request()

    def _repo(self, repo: str) -> Repository:
        return self._github.get_repo(repo)  # lazy: no request until a method needs one

    def _request(self, verb: str, repo: str, path: str, **options):
        """One REST call under the repository's URL that PyGithub does not wrap as we need; its JSON."""
        return self._call(lambda: self._github.requester.requestJsonAndCheck(
            verb, f"{self._repo(repo).url}{path}", **options))[1]

    def get_issue(self, repo: str, number: int) -> IssueSnapshot:
        """The issue; IssueTransferred when its URL redirects to another repository's issue."""
        data = self._call(lambda: self._repo(repo).get_issue(number).raw_data)
        # PyGithub follows GitHub's 301 for a transferred issue and returns the issue where it went.
        moved_to = str(data.get("repository_url", "")).rsplit("/repos/", 1)[-1]
        if moved_to and moved_to.lower() != repo.lower():
            raise IssueTransferred(f"transferred to {moved_to}#{data.get('number')}", status=301)
        return IssueSnapshot.from_json(data)

    def list_labels(self, repo: str) -> list[str]:
        """Every label of the repository, following the Link header through all pages."""
        return self._call(lambda: [label.name for label in self._repo(repo).get_labels()])

    def get_repository(self, repo: str) -> dict[str, Any] | None:
        """{"repo", "repo_id", "private"} as GitHub says now (a renamed repository's old name is followed),
        or None when this installation cannot see it."""
        data = _unless((403, 404), None, lambda: self._call(lambda: self._repo(repo).raw_data))  # the one GET
        return None if data is None else {"repo": data["full_name"], "repo_id": int(data["id"]),
                                          "private": bool(data.get("private"))}

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> list[str] | None:
        """Add `labels`; the issue's labels after the write, as GitHub's answer lists them (None: none added).

        The answer is the issue as GitHub has it, not as the delivery said: a label a maintainer put on in
        the meantime shows there (bot.labeling.act)."""
        if not labels:
            return None
        data = self._request("POST", repo, f"/issues/{number}/labels", input=list(labels))  # a bare list
        return [label["name"] for label in data or ()]

    def list_issue_types(self, repo: str) -> list[str]:
        """The issue types the repository offers (its organisation's); none where types are off (404)."""
        # 404: a user's repository, or an organisation without issue types
        data = _unless((404,), [], lambda: self._request("GET", repo, "/issue-types"))
        return [item["name"] for item in data if item.get("is_enabled", True)]

    def set_issue_type(self, repo: str, number: int, issue_type: str) -> None:
        """PATCH the issue's type by name (PyGithub 2.10's Issue.edit has no `type`)."""
        self._request("PATCH", repo, f"/issues/{number}", input={"type": issue_type})

    def remove_label(self, repo: str, number: int, label: str) -> None:
        # PyGithub's remove_from_labels leaves "/" unescaped, which breaks names like "area/api".
        self._request("DELETE", repo, f"/issues/{number}/labels/{quote(label, safe='')}")

    def create_label(self, repo: str, name: str, color: str, description: str) -> None:
        self._call(lambda: self._repo(repo).create_label(name, color, description))

    def create_comment(self, repo: str, number: int, body: str) -> None:
        self._call(lambda: self._repo(repo).get_issue(number).create_comment(body))

    def list_comments(self, repo: str, number: int) -> list[str]:
        """The bodies of the issue's comments, oldest first, through all pages."""
        return self._call(lambda: [comment.body
                                   for comment in self._repo(repo).get_issue(number).get_comments()])

    def react_to_comment(self, repo: str, comment_id: int, content: str) -> None:
        """Put a reaction ("-1", "confused", ...) on an issue comment: an answer that pings nobody."""
        self._request("POST", repo, f"/issues/comments/{int(comment_id)}/reactions", input={"content": content})

    def get_permission(self, repo: str, login: str) -> str:
        """The login's role on the repository: admin|maintain|write|triage|read|none (also for 404)."""
        return _unless((404,), "none", lambda: role_of(
            self._request("GET", repo, f"/collaborators/{quote(login, safe='')}/permission")))

    def get_file(self, repo: str, path: str, *, etag: str | None = None) -> RepoFile | Unchanged | None:
        """A file on the default branch (Contents API); None when it is missing, NotAFile for a folder (GitHub
        lists it), a symlink or a submodule.

        With `etag` the GET is conditional: UNCHANGED when GitHub answers 304, which costs no rate limit.
        """
        url = f"{self._repo(repo).url}/contents/{quote(path)}"
        conditional = {"If-None-Match": etag} if etag else None
        answer = _unless((404,), None, lambda: self._call(lambda: self._get_with_status(url, conditional)))
        if answer is None:
            return None
        status, headers, data = answer
        if status == 304:
            return UNCHANGED
        if not isinstance(data, dict) or data.get("type") != "file":
            raise NotAFile(path, "folder" if isinstance(data, list) else str((data or {}).get("type", "thing")))
        # encoding "none": GitHub sends no content over 1 MB
        raw = base64.b64decode(data.get("content") or "") if data.get("encoding") == "base64" else None
        return RepoFile(sha=data["sha"], size=int(data["size"]), content=raw,
                        etag={key.lower(): value for key, value in headers.items()}.get("etag"))

    def _get_with_status(self, url: str, headers: dict[str, str] | None) -> tuple[int, dict, object]:
        """(status, headers, parsed JSON) of one GET; PyGithub's JSON call hides the status, and a 304
        must be told from a 200."""
        requester = self._github.requester
        status, response_headers, body = requester.requestJson("GET", url, headers=headers)
        data = json.loads(body) if body and status != 304 else None
        if status >= 400:
            raise requester.createException(status, response_headers, data)
        return status, response_headers, data

    def list_issues_page(self, repo: str, page: int, per_page: int = 100) -> list[IssueSnapshot]:
        """One page (1-based) of all issues and pull requests, oldest first."""
        params = {"state": "all", "sort": "created", "direction": "asc", "per_page": per_page, "page": page}
        return [IssueSnapshot.from_json(item) for item in self._request("GET", repo, "/issues", parameters=params)]


def _jwt_signer(private_key: str) -> Callable[[dict], str]:
    """A signer of the App's JWT payloads (RS256) with the PEM key parsed once; a bad key fails here, at
    start-up, not on the first job."""
    try:
        key = serialization.load_pem_private_key(private_key.encode(), password=None)
    except (ValueError, TypeError, AttributeError):
        key = None
    if not isinstance(key, RSAPrivateKey):
        raise ValueError("the GitHub App private key is not a PEM RSA private key; "
                         "use the .pem file downloaded from the App's settings page")
    return lambda payload: jwt.encode(payload, key=key, algorithm="RS256")


class GitHubApp:
    """The App's identity: JWT from app id + PEM key; one PyGithubWriter per installation, cached;
    PyGithub's AppInstallationAuth caches the installation token until it expires."""

    def __init__(self, app_id: int, private_key: str, api_url: str = "https://api.github.com", *,
                 write_interval: float = 1.0, read_interval: float = 0.0, timeout: int = 15):
        # PyGithub's AppAuth parses the PEM on every JWT, and parsing checks the RSA key: about 80 ms a
        # token on 2 cores, paid per installation per hour by every worker. Parsed once here, signing is 1 ms.
        self._auth = Auth.AppAuth(app_id, sign_func=_jwt_signer(private_key))
        self._api_url = api_url.rstrip("/")
        # PyGithub's client-side throttle, per client (so per installation): GitHub asks for writes at least
        # a second apart and reads one at a time; a worker process makes its calls one at a time anyway.
        self._write_interval, self._read_interval = write_interval, read_interval
        self._timeout = timeout  # seconds per HTTP request
        self._writers: dict[int, PyGithubWriter] = {}
        self._integration: GithubIntegration | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, write_interval: float | None = None) -> GitHubApp:
        """The App the settings name, with their throttle; a worker passes `write_interval=0`, since it spaces
        each installation's writes across every process itself (bot.github_api.write_spacing)."""
        interval = settings.github_write_interval if write_interval is None else write_interval
        return cls(settings.app_id, settings.private_key, settings.api_url,
                   write_interval=interval, read_interval=settings.github_read_interval)

    def _as_app(self) -> GithubIntegration:
        """PyGithub's client authenticated as the App itself: a fresh JWT on every request."""
        if self._integration is None:
            self._integration = GithubIntegration(
                auth=self._auth, base_url=self._api_url, timeout=self._timeout, retry=None,
                seconds_between_requests=self._read_interval, seconds_between_writes=self._write_interval)
        return self._integration

    def installation_id_for(self, repo: str) -> int:
        """The installation that covers `repo` (GET /repos/{owner}/{repo}/installation, as the App)."""
        owner, name = repo.split("/", 1)
        with _github_errors():
            return self._as_app().get_repo_installation(owner, name).id

    def list_deliveries_page(self, cursor: str | None = None,
                             per_page: int = 100) -> tuple[list[dict], str | None]:
        """One page of the App's webhook deliveries, newest first, and the cursor of the next (None: last).

        GET /app/hook/deliveries; PyGithub 2.10 does not wrap it, so its requester calls it with the JWT.
        """
        params: dict[str, Any] = {"per_page": per_page, **({"cursor": cursor} if cursor else {})}
        headers, data = self._app_request("GET", "/app/hook/deliveries", parameters=params)
        return list(data or []), _next_cursor(headers)

    def app(self) -> dict:
        """The App as GitHub describes it (GET /app, as the App): id, slug, owner, permissions."""
        return self._app_request("GET", "/app")[1] or {}

    def installations(self, *, max_pages: int = 10) -> list[dict]:
        """The App's installations as GitHub describes them (GET /app/installations, as the App): each with its
        account, permissions and single file's paths; at most `max_pages` pages of 100."""
        found: list[dict] = []
        for page in range(1, max_pages + 1):
            _, data = self._app_request("GET", "/app/installations", parameters={"per_page": 100, "page": page})
            found.extend(data or [])
            if len(data or []) < 100:
                break
        return found

    def installation_state(self, installation_id: int) -> str | None:
        """What GitHub says of an installation now: "active", "suspended", or None when it has none by that
        id. Asked by requesting a token for it (POST /app/installations/{id}/access_tokens, as the App):
        GitHub answers 404 for a deleted installation and 403 for a suspended one."""
        try:
            with _github_errors():
                self._as_app().get_access_token(installation_id)
        except PermanentGitHubError as error:
            if error.status not in (403, 404):
                raise
            return "suspended" if error.status == 403 else None
        return "active"

    def repository_installation(self, repo: str) -> int | None:
        """The installation that covers `repo` now, or None when none of ours does (GitHub's 404)."""
        return _unless((404,), None, lambda: self.installation_id_for(repo))

    def repository(self, installation_id: int, repo: str) -> dict[str, Any] | None:
        """{"repo", "repo_id", "private"} as the installation sees `repo` now (bot.lifecycle.repositories)."""
        return self.writer_for(installation_id).get_repository(repo)

    def redeliver(self, delivery_id: int) -> None:
        """Ask GitHub to send one delivery again (POST /app/hook/deliveries/{id}/attempts, 202)."""
        self._app_request("POST", f"/app/hook/deliveries/{int(delivery_id)}/attempts")

    def _app_request(self, verb: str, path: str, **options) -> tuple[dict, Any]:
        """(headers, JSON) of one REST call as the App that PyGithub does not wrap."""
        with _github_errors():
            return self._as_app().requester.requestJsonAndCheck(verb, path, **options)

    def writer_for(self, installation_id: int) -> PyGithubWriter:
        """The writer acting as this installation (created on first use, then reused)."""
        if installation_id not in self._writers:
            self._writers[installation_id] = PyGithubWriter(self._client(installation_id),
                                                            renew=lambda: self._client(installation_id))
        return self._writers[installation_id]

    def _client(self, installation_id: int) -> Github:
        """A client with its own AppInstallationAuth, which fetches a token on first use and renews it."""
        return Github(auth=self._auth.get_installation_auth(installation_id), base_url=self._api_url,
                      timeout=self._timeout, per_page=100, lazy=True,
                      # None: no urllib3 retries. PyGithub's default GithubRetry would sleep through
                      # rate limits inside the job; the worker reschedules instead.
                      retry=None, seconds_between_requests=self._read_interval,
                      seconds_between_writes=self._write_interval)
