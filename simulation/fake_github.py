"""A fake GitHub REST API on loopback: the endpoints the App calls, answering with GitHub's response shapes.

Used by the tests and by `issue-sorter replay`, so it needs nothing outside the package. It checks the App's
JWT with the App's public key: pass `public_key_pem`, or leave it out and give the bot `fake.private_key_pem`
(a key pair the fake made). Installation tokens expire after `token_ttl` seconds; an expired, unknown or
missing token gets 401, as on GitHub, so PyGithub's token refresh is exercised for real. A transferred
issue's old URLs answer 301 to /repositories/{id}/issues/{number}, as GitHub's do.

It also keeps the App's webhook deliveries (`add_delivery`): GET /app/hook/deliveries pages them by
cursor, and POST /app/hook/deliveries/{id}/attempts redelivers one, really sending it to `webhook_url`
(signed with `webhook_secret`) when the fake knows its body, and listing the attempt as GitHub does.
It plays the manifest flow of `issue-sorter setup` too: the new-App pages and the code conversion.

It also plays GitHub's web flow for the App's OAuth client (`add_oauth_client`): the authorize page approves
at once as the user named by `sign_in_as`, and the user token it leads to sees the installations and
repositories that user collaborates on, with their permissions.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import itertools
import json
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import jwt
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask, Response, abort, request
from werkzeug.exceptions import HTTPException
from werkzeug.serving import WSGIRequestHandler, make_server

from bot.intake.signatures import sign_body

WEB_URL = "https://github.com"
DOCS_URL = "https://docs.github.com/rest"
DEFAULT_INSTALLATION_ID = 1
CONTENTS_MAX_BYTES = 1024 * 1024  # the Contents API sends no content for a file bigger than this
NEW_LABEL_COLOR = "ededed"  # what GitHub gives a label created by adding it to an issue
CONFIG_FILE = ".github/issue-sorter.yml"  # app.yml's one single file: what an installation may read by default
REDELIVERY_WINDOW = 3 * 24 * 3600  # seconds: GitHub redelivers only what it delivered in the past three days
USER_TOKEN_TTL = 28800  # seconds; GitHub's user tokens for an App expire after eight hours
WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
ROLE_PERMISSION = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read"}
ROLE_RANK = {"read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}
FAILURE_MESSAGES = {
    401: "Bad credentials",
    403: "Resource not accessible by integration",
    404: "Not Found",
    410: "Issues are disabled for this repo",
    422: "Validation Failed",
    429: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
}
RATE_LIMIT_MESSAGE = "API rate limit exceeded for installation. Check out the documentation for more."
REPO_URLS = {  # key -> suffix of the repository's API URL, as GitHub writes them
    "forks_url": "/forks", "keys_url": "/keys{/key_id}", "collaborators_url": "/collaborators{/collaborator}",
    "teams_url": "/teams", "hooks_url": "/hooks", "issue_events_url": "/issues/events{/number}",
    "events_url": "/events", "assignees_url": "/assignees{/user}", "branches_url": "/branches{/branch}",
    "tags_url": "/tags", "blobs_url": "/git/blobs{/sha}", "git_tags_url": "/git/tags{/sha}",
    "git_refs_url": "/git/refs{/sha}", "trees_url": "/git/trees{/sha}", "statuses_url": "/statuses/{sha}",
    "languages_url": "/languages", "stargazers_url": "/stargazers", "contributors_url": "/contributors",
    "subscribers_url": "/subscribers", "subscription_url": "/subscription", "commits_url": "/commits{/sha}",
    "git_commits_url": "/git/commits{/sha}", "comments_url": "/comments{/number}",
    "issue_comment_url": "/issues/comments{/number}", "contents_url": "/contents/{+path}",
    "compare_url": "/compare/{base}...{head}", "merges_url": "/merges",
    "archive_url": "/{archive_format}{/ref}", "downloads_url": "/downloads", "issues_url": "/issues{/number}",
    "pulls_url": "/pulls{/number}", "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}", "labels_url": "/labels{/name}",
    "releases_url": "/releases{/id}", "deployments_url": "/deployments",
}
REPO_SETTINGS = {  # the repository fields whose values the App never reads
    "homepage": None, "size": 0, "stargazers_count": 0, "watchers_count": 0, "language": None,
    "has_issues": True, "has_projects": True, "has_downloads": True, "has_wiki": True, "has_pages": False,
    "forks_count": 0, "mirror_url": None, "archived": False, "disabled": False, "open_issues_count": 0,
    "license": None, "allow_forking": True, "is_template": False, "web_commit_signoff_required": False,
    "topics": [], "visibility": "public", "forks": 0, "open_issues": 0, "watchers": 0,
    "default_branch": "main",
    "permissions": {"admin": False, "maintain": False, "push": False, "triage": False, "pull": True},
    "temp_clone_token": "", "allow_squash_merge": True, "allow_merge_commit": True,
    "allow_rebase_merge": True,
    "allow_auto_merge": False, "delete_branch_on_merge": False, "allow_update_branch": False,
    "use_squash_pr_title_as_default": False,
}


def generate_app_keypair() -> tuple[str, str]:
    """A fresh RSA key pair as (private PEM, public PEM), like the .pem file GitHub gives an App."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private.decode(), public.decode()


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str  # decoded: ".../labels/needs triage"
    query: dict[str, str]
    json: Any  # the parsed body, or None
    status: int  # what the fake answered
    raw_path: str  # as sent on the wire: ".../labels/needs%20triage"
    received_at: float = dataclasses.field(default=0.0, compare=False)  # time.time() on arrival


@dataclasses.dataclass(frozen=True)
class IssuedToken:
    token: str
    installation_id: int
    expires_at: int  # epoch seconds; GitHub's expires_at has whole seconds


@dataclasses.dataclass
class _Failure:
    method: str
    pattern: re.Pattern
    status: int
    times: int
    headers: dict[str, str]
    body: Any


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args, **kwargs) -> None:  # `requests` is the log
        pass


# --- JSON shapes, with the same keys as GitHub's (tests/test_github_client.py compares them) ----------

def _timestamp(moment: float) -> str:
    return datetime.datetime.fromtimestamp(int(moment), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")  # GitHub's reaction contents


def _reactions(url: str) -> dict[str, Any]:
    return {"url": url, **dict.fromkeys(("total_count", *REACTIONS), 0)}


def _user_json(api: str, login: str, kind: str = "User") -> dict[str, Any]:
    url, uid = f"{api}/users/{login}", int(hashlib.sha1(login.encode()).hexdigest()[:7], 16)
    return {
        "login": login, "id": uid, "node_id": f"U_{uid}", "gravatar_id": "", "type": kind,
        "site_admin": False,
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4", "url": url,
        "html_url": f"{WEB_URL}/{login}", "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}", "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}", "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs", "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}", "received_events_url": f"{url}/received_events",
    }


def _permission_levels(role: str) -> dict[str, bool]:
    """The `permissions` object GitHub gives a repository or collaborator, for a role name."""
    rank = ROLE_RANK.get(role, 0)
    return {level: rank > i for i, level in enumerate(("pull", "triage", "push", "maintain", "admin"))}


def _installation_json(api: str, installation_id: int, owner: str, app_id: int,
                       single_files: Iterable[str] = (CONFIG_FILE,)) -> dict[str, Any]:
    """An installation as GitHub shows it to the App: app.yml's permissions, with the single file's paths the
    App's settings name (none: the path was never set)."""
    account = _user_json(api, owner, "Organization")
    single_files = list(single_files)
    return {
        "id": installation_id, "account": account, "repository_selection": "selected",
        "access_tokens_url": f"{api}/app/installations/{installation_id}/access_tokens",
        "repositories_url": f"{api}/installation/repositories",
        "html_url": f"{WEB_URL}/organizations/{owner}/settings/installations/{installation_id}",
        "app_id": app_id, "app_slug": "issue-sorter", "target_id": account["id"],
        "target_type": "Organization",
        "permissions": {"issues": "write", "metadata": "read", "single_file": "read"}, "events": ["issues"],
        "created_at": _timestamp(0), "updated_at": _timestamp(0),
        "single_file_name": single_files[0] if len(single_files) == 1 else None,
        "has_multiple_single_files": len(single_files) > 1, "single_file_paths": single_files,
        "suspended_by": None, "suspended_at": None}


def _repo_json(api: str, full_name: str, repo_id: int, private: bool = False) -> dict[str, Any]:
    url, html, stamp = f"{api}/repos/{full_name}", f"{WEB_URL}/{full_name}", _timestamp(0)
    owner = _user_json(api, full_name.split("/")[0], "Organization")
    return {
        "id": repo_id, "node_id": f"R_{repo_id}", "name": full_name.split("/")[1], "full_name": full_name,
        "private": private, "owner": owner, "html_url": html, "description": None, "fork": False, "url": url,
        **{key: url + suffix for key, suffix in REPO_URLS.items()},
        "created_at": stamp, "updated_at": stamp, "pushed_at": stamp,
        "git_url": f"git://github.com/{full_name}.git",
        "ssh_url": f"git@github.com:{full_name}.git", "clone_url": f"{html}.git", "svn_url": html,
        **REPO_SETTINGS, "organization": owner, "network_count": 0, "subscribers_count": 0,
    }


def _label_json(api: str, full_name: str, label: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": label["id"], "node_id": f"LA_{label['id']}",
            "url": f"{api}/repos/{full_name}/labels/{quote(label['name'], safe='')}", "name": label["name"],
            "color": label["color"], "default": False, "description": label["description"]}


def _issue_json(api: str, full_name: str, issue: Mapping[str, Any], labels: list[dict], *,
                single: bool) -> dict[str, Any]:
    url = f"{api}/repos/{full_name}/issues/{issue['number']}"
    html = f"{WEB_URL}/{full_name}/issues/{issue['number']}"
    created = _timestamp(issue["created_at"])
    data = {
        "url": url, "repository_url": f"{api}/repos/{full_name}", "labels_url": f"{url}/labels{{/name}}",
        "comments_url": f"{url}/comments", "events_url": f"{url}/events", "html_url": html, "id": issue["id"],
        "node_id": f"I_{issue['id']}", "number": issue["number"], "title": issue["title"],
        "user": _user_json(api, issue["author"]), "labels": labels, "state": issue["state"], "locked": False,
        "assignee": None, "assignees": [], "milestone": None, "comments": len(issue["comments"]),
        "created_at": created, "updated_at": created, "closed_at": None, "author_association": "NONE",
        "active_lock_reason": None, "body": issue["body"], "reactions": _reactions(f"{url}/reactions"),
        "timeline_url": f"{url}/timeline", "performed_via_github_app": None,
        "state_reason": "completed" if issue["state"] == "closed" else None,
    }
    if issue.get("type"):  # GitHub adds the organisation's issue type where it has one
        data["type"] = issue["type"]
    if single:
        data["closed_by"] = None  # only the single-issue endpoint sends it
    if issue["is_pull_request"]:
        data["draft"] = False
        data["pull_request"] = {"url": f"{api}/repos/{full_name}/pulls/{issue['number']}",
                                "html_url": html.replace("/issues/", "/pull/"), "diff_url": f"{html}.diff",
                                "patch_url": f"{html}.patch", "merged_at": None}
    return data


def _issue_type_json(name: str, type_id: int) -> dict[str, Any]:
    """An issue type as GET /repos/{owner}/{repo}/issue-types lists it."""
    stamp = _timestamp(0)
    return {"id": type_id, "node_id": f"IT_{type_id}", "name": name, "description": None, "color": "gray",
            "created_at": stamp, "updated_at": stamp, "is_enabled": True}


def _delivery_json(attempt: Mapping[str, Any]) -> dict[str, Any]:
    """GitHub's "Simple webhook delivery" (hook-delivery-item)."""
    code = attempt["status_code"]
    status = "OK" if 200 <= code < 300 else f"Invalid HTTP Response: {code}" if code else "failed to connect"
    return {"id": attempt["id"], "guid": attempt["guid"], "delivered_at": _timestamp(attempt["delivered_at"]),
            "redelivery": attempt["redelivery"], "duration": 0.05, "status": status, "status_code": code,
            "event": attempt["event"], "action": attempt["action"],
            "installation_id": attempt["installation_id"], "repository_id": attempt["repository_id"],
            "throttled_at": None}


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    text = "" if body is None else json.dumps(body)
    return Response(text, status, headers=dict(headers or {}), content_type="application/json; charset=utf-8")


def _error(status: int, message: str, **extra: Any) -> Response:
    return _json({"message": message, **extra, "documentation_url": DOCS_URL}, status)


class FakeGitHub:
    """In-memory repositories, issues and labels behind a real HTTP server on 127.0.0.1."""

    def __init__(self, app_id: int = 1, public_key_pem: str | None = None, *, token_ttl: float = 3600.0,
                 host: str = "127.0.0.1", port: int = 0):
        self.app_id = app_id
        self.private_key_pem: str | None = None  # set only when the fake made the key pair itself
        if public_key_pem is None:
            self.private_key_pem, public_key_pem = generate_app_keypair()
        self._public_key = serialization.load_pem_public_key(public_key_pem.encode())
        self.token_ttl = token_ttl  # seconds an installation token lives; may change between calls
        self.latency = 0.0  # seconds every answer waits, apart from the others (GitHub's round trip)
        self._host, self._port = host, port  # port 0: any free port
        self._lock = threading.RLock()
        self._ids = itertools.count(1000)
        self._repos: dict[str, dict[str, Any]] = {}
        self._installations: dict[int, set[str]] = {}
        self._suspended: set[int] = set()  # installations GitHub refuses tokens to (403)
        # installation → the single files it may read, where set_installation named them (every file is
        # readable elsewhere, and the installation shows app.yml's one path)
        self._single_files: dict[int, list[str]] = {}
        self._tokens: dict[str, IssuedToken] = {}
        self._failures: list[_Failure] = []
        self._moved: dict[tuple[str, int], tuple[int, int]] = {}  # (repo, number) → (new repo id, number)
        self._requests: list[RecordedRequest] = []
        self._reactions: dict[tuple[str, int], list[dict[str, Any]]] = {}  # (repo, comment id) → reactions
        self._deliveries: dict[int, dict[str, Any]] = {}  # id -> attempt; "body" (bytes) is ours, not listed
        self.webhook_url: str | None = None  # where redeliveries go; None: "failed to connect"
        self.webhook_secret: str | None = None  # signs redeliveries' X-Hub-Signature-256
        self._oauth_clients: dict[str, str] = {}  # client id -> secret
        self._signing_in: str | None = None  # the login the authorize page approves as
        self._codes: dict[str, tuple[str, str]] = {}  # OAuth code -> (login, client id), used once
        self._user_tokens: dict[str, tuple[str, float]] = {}  # user token -> (login, expiry)
        self._server = self._thread = None
        self._manifest_codes: dict[str, tuple[dict[str, Any], str | None]] = {}  # code → (manifest, org)
        self._who: dict[str, str | None] = {}  # endpoint → who may call it (_create_flask's table)
        self._flask = self._create_flask()

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        self._server = make_server(self._host, self._port, self._wsgi, threaded=True,
                                   request_handler=_QuietHandler)
        # A short poll keeps stop() quick: shutdown() waits for the loop's next poll.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join()
            self._server = self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL to use as GITHUB_API_URL."""
        if self._server is None:
            raise RuntimeError("FakeGitHub is not running; call start() first")
        return f"http://{self._host}:{self._server.server_port}"

    # --- setting up state ------------------------------------------------------------------------
    def set_installation(self, installation_id: int, *, suspended: bool | None = None,
                         deleted: bool = False, removed: Iterable[str] = (),
                         single_files: Iterable[str] | None = None) -> None:
        """What GitHub does before it sends installation events: suspend or unsuspend an installation,
        delete it (the App uninstalled), or take repositories out of it. `single_files`: the paths the App's
        single-file permission names (empty: never set): any other file answers 403, as on a private
        repository."""
        with self._lock:
            if single_files is not None:
                self._single_files[installation_id] = list(single_files)
            if suspended is not None:
                (self._suspended.add if suspended else self._suspended.discard)(installation_id)
            if deleted:
                self._installations.pop(installation_id, None)
            for full_name in removed:
                self._installations.get(installation_id, set()).discard(full_name)

    def set_private(self, full_name: str, private: bool = True) -> None:
        with self._lock:
            self._repos[full_name]["private"] = private

    def add_repo(self, full_name: str, labels: Iterable[str | Mapping[str, str]] = (), *,
                 installation_id: int = DEFAULT_INSTALLATION_ID,
                 files: Mapping[str, str | bytes] | None = None,
                 collaborators: Mapping[str, str] | None = None, issue_types: Iterable[str] = ()) -> None:
        """Labels are names or {"name", "color", "description"}; collaborators map login -> role name;
        files map path -> text (stored as UTF-8) or bytes; issue_types are the organisation's type names
        (none: the repository has no issue types, and its /issue-types answers 404)."""
        with self._lock:
            self._repos[full_name] = {"id": next(self._ids), "installation_id": installation_id, "labels": {},
                                      "issues": {}, "files": dict(files or {}),
                                      "collaborators": dict(collaborators or {}),
                                      "issue_types": [_issue_type_json(n, next(self._ids)) for n in issue_types]}
            self._installations.setdefault(installation_id, set()).add(full_name)
            for label in labels:
                spec = {"name": label} if isinstance(label, str) else label
                self._label(full_name, spec["name"], spec.get("color", NEW_LABEL_COLOR),
                            spec.get("description"))

    def add_issue(self, full_name: str, number: int, title: str, body: str | None = "",
                  labels: Iterable[str] = (), state: str = "open", author: str = "octocat",
                  is_pull_request: bool = False, created_at: datetime.datetime | None = None) -> None:
        """`created_at` should be timezone-aware; it defaults to now. Unknown labels join the repository."""
        with self._lock:
            created = (created_at or datetime.datetime.now(datetime.UTC)).timestamp()
            self._repos[full_name]["issues"][number] = {
                "id": next(self._ids), "number": number, "title": title, "body": body, "state": state,
                "author": author, "is_pull_request": is_pull_request, "created_at": created, "comments": [],
                "labels": [self._label(full_name, name)["name"] for name in labels]}

    def add_delivery(self, event: str = "issues", action: str | None = "opened", *, guid: str | None = None,
                     status_code: int = 202, delivered_at: datetime.datetime | None = None, body: Any = None,
                     installation_id: int | None = DEFAULT_INSTALLATION_ID, repository_id: int | None = None,
                     redelivery: bool = False) -> dict[str, Any]:
        """Record a delivery attempt GitHub made, as GET /app/hook/deliveries will list it.

        `status_code` is what the receiver answered (0: no answer); `body` (a dict or bytes) is the payload a
        redelivery re-sends; `delivered_at` should be timezone-aware and defaults to now.
        """
        with self._lock:
            moment = (delivered_at or datetime.datetime.now(datetime.UTC)).timestamp()
            raw = json.dumps(body).encode() if isinstance(body, dict) else body
            attempt = {"id": next(self._ids), "guid": guid or secrets.token_hex(16), "delivered_at": moment,
                       "redelivery": redelivery, "status_code": status_code, "event": event, "action": action,
                       "installation_id": installation_id, "repository_id": repository_id, "body": raw}
            self._deliveries[attempt["id"]] = attempt
            return _delivery_json(attempt)

    def fail_next(self, method: str, path_regex: str, status: int, *, times: int = 1,
                  headers: Mapping[str, str] | None = None, body: Any = None) -> None:
        """Answer the next `times` requests whose decoded path fully matches `path_regex` with `status`.

        Without `body`, the message is GitHub's for that status (a rate-limit message when `headers` has
        X-RateLimit-Remaining: 0).
        """
        with self._lock:
            self._failures.append(_Failure(method.upper(), re.compile(path_regex), status, times,
                                           dict(headers or {}), body))

    def transfer_issue(self, full_name: str, number: int, new_full_name: str, new_number: int) -> None:
        """Move an issue to another repository; its old URLs then answer 301 Moved Permanently."""
        with self._lock:
            issue = self._repos[full_name]["issues"].pop(number)
            labels = [self._label(new_full_name, name)["name"] for name in issue["labels"]]
            moved = {**issue, "number": new_number, "labels": labels}
            self._repos[new_full_name]["issues"][new_number] = moved
            self._moved[(full_name, number)] = (self._repos[new_full_name]["id"], new_number)

    def expire_tokens(self) -> None:
        """Refuse every installation token issued so far (401), as GitHub does once one runs out or is
        revoked, while the client still believes it valid."""
        with self._lock:
            self._tokens = {token: dataclasses.replace(issued, expires_at=0)
                            for token, issued in self._tokens.items()}

    def add_oauth_client(self, client_id: str, client_secret: str) -> None:
        """The App's OAuth client, as `issue-sorter setup` would get it from the manifest flow."""
        with self._lock:
            self._oauth_clients[client_id] = client_secret

    def sign_in_as(self, login: str | None) -> None:
        """The user who is signed in to the fake github.com and approves the App at once; None: nobody."""
        with self._lock:
            self._signing_in = login

    def user_token_for(self, login: str) -> str:
        """A user token for `login`, as the web flow ends with (for tests that skip the browser)."""
        with self._lock:
            token = f"ghu_{secrets.token_hex(18)}"
            self._user_tokens[token] = (login, time.time() + USER_TOKEN_TTL)
            return token

    # --- reading state ---------------------------------------------------------------------------
    def repo_id(self, full_name: str) -> int:
        """GitHub's id of the repository, as its payloads carry it."""
        with self._lock:
            return self._repos[full_name]["id"]

    def issue_labels(self, full_name: str, number: int) -> list[str]:
        with self._lock:
            return list(self._repos[full_name]["issues"][number]["labels"])

    def repo_labels(self, full_name: str) -> list[str]:
        with self._lock:
            return [label["name"] for label in self._repos[full_name]["labels"].values()]

    def comments(self, full_name: str, number: int) -> list[str]:
        """Bodies of the comments posted on the issue, oldest first."""
        with self._lock:
            return [comment["body"] for comment in self._repos[full_name]["issues"][number]["comments"]]

    def reactions(self, full_name: str, comment_id: int) -> list[str]:
        """The contents ("-1", "confused", ...) of the reactions put on a comment, oldest first."""
        with self._lock:
            return [reaction["content"] for reaction in self._reactions.get((full_name, comment_id), [])]

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request answered so far, token requests and refusals included."""
        with self._lock:
            return list(self._requests)

    @property
    def deliveries(self) -> list[dict[str, Any]]:
        """Every delivery attempt as GitHub lists it, newest first (redeliveries included)."""
        with self._lock:
            return [_delivery_json(attempt) for attempt in self._newest_first()]

    @property
    def issued_tokens(self) -> list[IssuedToken]:
        with self._lock:
            return list(self._tokens.values())

    def write_times(self) -> dict[int, list[float]]:
        """Installation id -> the arrival times (time.time(), sorted) of the writes (POST, PATCH, PUT,
        DELETE) to its repositories: what GitHub's "a second between writes" is counted on."""
        with self._lock:
            installation_of = {name: repo["installation_id"] for name, repo in self._repos.items()}
            times: dict[int, list[float]] = {}
            for req in self._requests:
                match = re.match(r"/repos/([^/]+/[^/]+)/", req.path)
                if req.method in WRITE_METHODS and match and match.group(1) in installation_of:
                    times.setdefault(installation_of[match.group(1)], []).append(req.received_at)
        return {installation: sorted(moments) for installation, moments in times.items()}

    def calls(self, method: str, path_regex: str) -> list[RecordedRequest]:
        """Recorded requests with this method whose decoded path fully matches `path_regex`."""
        return [r for r in self.requests if r.method == method.upper() and re.fullmatch(path_regex, r.path)]

    # --- HTTP plumbing ---------------------------------------------------------------------------
    def _wsgi(self, environ, start_response):
        environ["fake.received_at"] = time.time()  # before waiting for the lock: when it reached GitHub
        if self.latency:
            time.sleep(self.latency)  # outside the lock: requests wait side by side, as on the internet
        with self._lock:  # one request at a time keeps the state consistent without finer locks
            return self._flask.wsgi_app(environ, start_response)

    def _create_flask(self) -> Flask:
        app = Flask(__name__)
        repo, issue = "/repos/<owner>/<name>", "/repos/<owner>/<name>/issues/<int:number>"
        # Who may call each route (GitHub's edge checks it before the handler): "app": the App's JWT; "web":
        # github.com's pages of the manifest and OAuth flows, no token yet (a code is the credential); "anyone":
        # also without a token; "user": a user token's own; "user+": an installation's or a user token;
        # None: an installation token.
        routes = [
            ("POST", "/app/installations/<int:installation_id>/access_tokens", self._access_token, "app"),
            ("GET", f"{repo}/installation", self._repo_installation, "app"),
            ("GET", "/app/installations", self._list_installations, "app"),
            ("GET", "/app", self._the_app, "app"),
            ("GET", repo, self._repository, None),
            ("GET", f"{repo}/issues", self._list_issues, None),
            ("GET", issue, self._issue, None),
            ("PATCH", issue, self._update_issue, None),
            ("GET", f"{repo}/issue-types", self._list_issue_types, None),
            ("GET", "/repositories/<int:repo_id>/issues/<int:number>", self._issue, None),
            ("GET", "/repositories/<int:repo_id>", self._public_repository, "anyone"),
            ("GET", f"{repo}/labels", self._list_labels, "user+"),
            ("POST", f"{repo}/labels", self._create_label, None),
            ("POST", f"{issue}/labels", self._add_labels, None),
            ("DELETE", f"{issue}/labels/<path:label>", self._remove_label, None),
            ("POST", f"{issue}/comments", self._create_comment, None),
            ("GET", f"{issue}/comments", self._list_comments, None),
            ("POST", f"{repo}/issues/comments/<int:comment_id>/reactions", self._create_reaction, None),
            ("GET", f"{repo}/collaborators/<login>/permission", self._permission, None),
            ("GET", f"{repo}/contents/<path:path>", self._contents, None),
            ("POST", "/settings/apps/new", self._new_app, "web"),
            ("POST", "/organizations/<org>/settings/apps/new", self._new_app, "web"),
            ("POST", "/app-manifests/<code>/conversions", self._manifest_conversion, "web"),
            ("GET", "/app/hook/deliveries", self._list_hook_deliveries, "app"),
            ("POST", "/app/hook/deliveries/<int:delivery_id>/attempts", self._redeliver_hook_delivery, "app"),
            ("GET", "/login/oauth/authorize", self._oauth_authorize, "web"),
            ("POST", "/login/oauth/access_token", self._oauth_access_token, "web"),
            ("GET", "/user", self._user, "user"),
            ("GET", "/user/installations", self._user_installations, "user"),
            ("GET", "/user/installations/<int:installation_id>/repositories", self._user_installation_repositories,
             "user"),
        ]
        for method, rule, view, who in routes:
            app.add_url_rule(rule, view.__name__.lstrip("_"), view, methods=[method])
            self._who[view.__name__.lstrip("_")] = who
        app.url_value_preprocessor(self._full_name)
        app.before_request(self._before_request)
        app.after_request(self._record)
        app.register_error_handler(HTTPException,
                                   lambda e: _error(e.code, FAILURE_MESSAGES.get(e.code, e.name)))
        return app

    def _before_request(self) -> Response | None:
        """Injected failures first, then authentication, like GitHub's edge before any handler runs."""
        for failure in self._failures:
            if failure.method == request.method and failure.pattern.fullmatch(request.path):
                failure.times -= 1
                if failure.times <= 0:
                    self._failures.remove(failure)
                return self._failure_response(failure)
        who, credentials = self._who.get(request.endpoint), request.headers.get("Authorization", "").partition(" ")[2]
        if who == "web" or (who == "anyone" and not credentials):
            return None
        if who == "user" or credentials.startswith("ghu_"):
            return self._check_user_token(credentials, who)
        if who == "app":
            if self._is_app_jwt(credentials):
                return None
            return _error(401, "A JSON web token could not be decoded")
        issued = self._tokens.get(credentials)
        # expired, or its installation deleted (the App uninstalled): GitHub revokes its tokens
        if issued is None or issued.expires_at <= time.time() or issued.installation_id not in self._installations:
            return _error(401, "Bad credentials")
        args = request.view_args or {}
        full_name = args.get("full_name")
        if full_name is not None and full_name not in self._installations[issued.installation_id]:
            return _error(404, "Not Found")  # GitHub hides what the installation cannot see
        moved = self._moved.get((full_name, args.get("number")))
        if moved is not None:  # a transferred issue: every URL under the old one redirects
            rest = request.path.split(f"/issues/{args['number']}", 1)[1]
            location = f"{self.url}/repositories/{moved[0]}/issues/{moved[1]}{rest}"
            body = {"message": "Moved Permanently", "url": location, "documentation_url": DOCS_URL}
            return _json(body, 301, {"Location": location})
        return None

    def _full_name(self, endpoint: str | None, args: dict[str, Any] | None) -> None:
        """The handlers take a repository's full name: /repos/{owner}/{name}'s, or that of /repositories/{id}
        (None when there is none)."""
        if args and "owner" in args:
            args["full_name"] = f"{args.pop('owner')}/{args.pop('name')}"
        elif args and "repo_id" in args:
            repo_id = args.pop("repo_id")
            args["full_name"] = next((name for name, repo in self._repos.items() if repo["id"] == repo_id), None)

    def _check_user_token(self, credentials: str, who: str | None) -> Response | None:
        login, expires = self._user_tokens.get(credentials, (None, 0.0))
        if login is None or expires <= time.time():
            return _error(401, "Bad credentials")
        if who == "user":
            return None
        args = request.view_args or {}
        if who != "user+" or "full_name" not in args:
            return _error(403, "Resource not accessible by integration")
        if self._role(args["full_name"], login) == "none":
            return _error(404, "Not Found")
        return None

    def _role(self, full_name: str, login: str) -> str:
        repo = self._repos.get(full_name)
        return repo["collaborators"].get(login, "none") if repo else "none"

    def _user_login(self) -> str:
        return self._user_tokens[request.headers["Authorization"].partition(" ")[2]][0]

    def _failure_response(self, failure: _Failure) -> Response:
        body = failure.body
        if body is None:
            headers = {key.lower(): value for key, value in failure.headers.items()}
            rate_limited = headers.get("x-ratelimit-remaining") == "0"
            message = FAILURE_MESSAGES.get(failure.status, "Server Error")
            message = RATE_LIMIT_MESSAGE if rate_limited else message
            body = {"message": message, "documentation_url": DOCS_URL}
        return _json(body, failure.status, failure.headers)

    # --- the manifest flow (github.com's new-App page, then the code conversion) --------------------
    def _new_app(self, org: str | None = None) -> Response:
        """What the user's browser meets after pressing the button: GitHub registers and redirects back."""
        try:
            manifest = json.loads(request.form["manifest"])
            redirect = manifest["redirect_url"]
            missing = [key for key in ("name", "url", "default_permissions") if not manifest.get(key)]
        except (KeyError, ValueError, TypeError):
            return _error(422, "Invalid manifest")
        if missing or not (manifest.get("hook_attributes") or {}).get("url"):
            return _error(422, "Invalid manifest", errors=missing or ["hook_attributes.url"])
        code = secrets.token_hex(10)
        self._manifest_codes[code] = (manifest, org)
        query = urlencode({"code": code, **({"state": request.args["state"]} if "state" in request.args else {})})
        return Response("", 302, headers={"Location": f"{redirect}?{query}"})

    def _manifest_conversion(self, code: str) -> Response:
        """POST /app-manifests/{code}/conversions: the App's credentials, once per code."""
        if code not in self._manifest_codes:
            return _error(404, "Not Found")
        manifest, org = self._manifest_codes.pop(code)
        slug = re.sub(r"[^a-z0-9]+", "-", manifest["name"].lower()).strip("-")
        stamp = _timestamp(time.time())
        app = {"id": self.app_id, "slug": slug, "node_id": f"A_{self.app_id}",
               "owner": _user_json(self.url, org or "octocat", "Organization" if org else "User"),
               "name": manifest["name"], "description": manifest.get("description", ""),
               "external_url": manifest["url"], "html_url": f"{WEB_URL}/apps/{slug}", "created_at": stamp,
               "updated_at": stamp, "permissions": manifest.get("default_permissions", {}),
               "events": manifest.get("default_events", []), "installations_count": 0,
               "client_id": f"Iv1.{secrets.token_hex(8)}", "client_secret": secrets.token_hex(20),
               "webhook_secret": secrets.token_hex(20), "pem": self.private_key_pem}
        return _json(app, 201)

    def _is_app_jwt(self, token: str) -> bool:
        try:
            claims = jwt.decode(token, self._public_key, algorithms=["RS256"],
                                options={"require": ["iat", "exp", "iss"]})
        except jwt.PyJWTError:
            return False
        # GitHub refuses a JWT that lives more than ten minutes.
        return str(claims["iss"]) == str(self.app_id) and claims["exp"] <= time.time() + 600

    def _record(self, response: Response) -> Response:
        raw_path = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or request.path
        self._requests.append(RecordedRequest(request.method, request.path, request.args.to_dict(),
                                              request.get_json(silent=True), response.status_code,
                                              raw_path.split("?")[0], request.environ["fake.received_at"]))
        return response

    def _label(self, full_name: str, name: str, color: str = NEW_LABEL_COLOR,
               description: str | None = None) -> dict[str, Any]:
        """The repository's label with this name (case-insensitive), created when missing."""
        labels = self._repos[full_name]["labels"]
        if name.lower() not in labels:
            labels[name.lower()] = {"id": next(self._ids), "name": name, "color": color,
                                    "description": description}
        return labels[name.lower()]

    def _labels_json(self, full_name: str, names: Iterable[str]) -> list[dict[str, Any]]:
        return [_label_json(self.url, full_name, self._label(full_name, name)) for name in names]

    def _issue_json(self, full_name: str, issue: Mapping[str, Any], *, single: bool = True) -> dict[str, Any]:
        return _issue_json(self.url, full_name, issue, self._labels_json(full_name, issue["labels"]),
                           single=single)

    def _paged(self, items: list[Any], wrap: Callable[[list[Any]], Any] = list) -> Response:
        """One page of `items` (as `wrap` makes it the answer's body) with GitHub's Link header (rels prev,
        next, last, first) for the others."""
        per_page = min(max(int(request.args.get("per_page", 30)), 1), 100)
        page, last = max(int(request.args.get("page", 1)), 1), max(math.ceil(len(items) / per_page), 1)
        rels = [("prev", page - 1)] if page > 1 else []
        rels += [("next", page + 1), ("last", last)] if page < last else []
        rels += [("first", 1)] if page > 1 else []
        params = {**request.args.to_dict(), "per_page": str(per_page)}
        link = ", ".join(f'<{self.url}{request.path}?{urlencode({**params, "page": n})}>; rel="{rel}"'
                         for rel, n in rels)
        return _json(wrap(items[(page - 1) * per_page:page * per_page]), headers={"Link": link} if link else {})

    def _issue_of(self, full_name: str | None, number: int) -> dict[str, Any]:
        """The repository's issue; a missing one is answered 404 (abort: GitHub's body, by the error handler)."""
        issue = self._repos[full_name]["issues"].get(number) if full_name in self._repos else None
        if issue is None:
            abort(404)
        return issue

    def _newest_first(self) -> list[dict[str, Any]]:
        return sorted(self._deliveries.values(), key=lambda a: (a["delivered_at"], a["id"]), reverse=True)

    def _send_webhook(self, attempt: Mapping[str, Any]) -> int:
        """POST the delivery to `webhook_url` as GitHub would; the receiver's status, 0 for no answer."""
        if not self.webhook_url or attempt["body"] is None:
            return 0
        body = attempt["body"]
        headers = {"X-GitHub-Event": attempt["event"], "X-GitHub-Delivery": attempt["guid"],
                   "Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/fake"}
        if self.webhook_secret:
            headers["X-Hub-Signature-256"] = sign_body(body, self.webhook_secret)
        try:
            return requests.post(self.webhook_url, data=body, headers=headers, timeout=10).status_code
        except requests.RequestException:
            return 0

    # --- endpoints -------------------------------------------------------------------------------
    def _access_token(self, installation_id: int) -> Response:
        if installation_id not in self._installations:
            return _error(404, "Not Found")
        if installation_id in self._suspended:
            return _error(403, "This installation has been suspended")
        expires_at = int(time.time() + self.token_ttl)
        issued = IssuedToken(f"ghs_{secrets.token_hex(18)}", installation_id, expires_at)
        self._tokens[issued.token] = issued
        permissions = (request.get_json(silent=True) or {}).get("permissions") or {
            "contents": "read", "issues": "write", "metadata": "read"}
        return _json({"token": issued.token, "expires_at": _timestamp(issued.expires_at),
                      "permissions": permissions, "repository_selection": "selected"}, 201)

    def _repo_installation(self, full_name: str) -> Response:
        iid = self._repos.get(full_name, {}).get("installation_id")
        if full_name not in self._installations.get(iid, ()):  # none, taken out of it, or the App uninstalled
            return _error(404, "Not Found")
        return _json(_installation_json(self.url, iid, full_name.split("/")[0], self.app_id,
                                        self._single_files.get(iid, [CONFIG_FILE])))

    def _the_app(self) -> Response:
        """The App itself (GET /app), owned by the account of its first installation ("octo" without one)."""
        owners = [sorted(names)[0].split("/")[0] for _, names in sorted(self._installations.items()) if names]
        owner = _user_json(self.url, owners[0] if owners else "octo", "Organization")
        return _json({"id": self.app_id, "slug": "issue-sorter", "name": "Issue Sorter", "owner": owner,
                      "html_url": f"{WEB_URL}/apps/issue-sorter", "events": ["issues", "issue_comment", "label"],
                      "permissions": {"issues": "write", "metadata": "read", "single_file": "read"}})

    def _list_installations(self) -> Response:
        """The App's installations (GET /app/installations, as the App), each named by its first repository's
        owner."""
        found = [(iid, sorted(names)) for iid, names in sorted(self._installations.items()) if names]
        return self._paged([_installation_json(self.url, iid, names[0].split("/")[0], self.app_id,
                                               self._single_files.get(iid, [CONFIG_FILE])) for iid, names in found])

    def _list_hook_deliveries(self) -> Response:
        """Newest first; the Link header's rel="next" carries the cursor of the next page, as on GitHub."""
        per_page = min(max(int(request.args.get("per_page", 30)), 1), 100)
        attempts, cursor = self._newest_first(), request.args.get("cursor")
        if cursor:
            position = next((i for i, a in enumerate(attempts) if f"v1_{a['id']}" == cursor), None)
            if position is None:
                return _error(422, "Validation Failed",
                              errors=[{"resource": "HookDelivery", "code": "invalid", "field": "cursor"}])
            attempts = attempts[position:]
        page, rest = attempts[:per_page], attempts[per_page:]
        headers = {}
        if rest:
            query = urlencode({"per_page": per_page, "cursor": f"v1_{rest[0]['id']}"})
            headers["Link"] = f'<{self.url}{request.path}?{query}>; rel="next"'
        return _json([_delivery_json(a) for a in page], headers=headers)

    def _redeliver_hook_delivery(self, delivery_id: int) -> Response:
        """202 and a new attempt with the same guid (`redelivery: true`), after really sending it."""
        original = self._deliveries.get(delivery_id)
        if original is None:
            return _error(404, "Not Found")
        if original["delivered_at"] < time.time() - REDELIVERY_WINDOW:
            return _error(422, "Validation Failed", errors=[{"resource": "HookDelivery", "code": "custom",
                                                              "message": "delivery is too old to redeliver"}])
        attempt = {**original, "id": next(self._ids), "delivered_at": time.time(), "redelivery": True,
                   "status_code": self._send_webhook(original)}
        self._deliveries[attempt["id"]] = attempt
        return _json({}, 202)

    def _repository(self, full_name: str) -> Response:
        repo = self._repos[full_name]  # one the token cannot see was answered 404 before this
        return _json(_repo_json(self.url, full_name, repo["id"], repo.get("private", False)))

    def _public_repository(self, full_name: str | None) -> Response:
        """GET /repositories/{id} without a token: a public repository; a private one is hidden (404)."""
        if full_name is None or self._repos[full_name].get("private", False):
            return _error(404, "Not Found")
        return _json(_repo_json(self.url, full_name, self._repos[full_name]["id"], False))

    def _list_issues(self, full_name: str) -> Response:
        state = request.args.get("state", "open")
        issues = [i for i in self._repos[full_name]["issues"].values() if state in ("all", i["state"])]
        newest_first = request.args.get("direction", "desc") != "asc"
        issues.sort(key=lambda i: (i["created_at"], i["number"]), reverse=newest_first)
        return self._paged(issues, lambda page: [self._issue_json(full_name, i, single=False) for i in page])

    def _issue(self, full_name: str | None, number: int) -> Response:
        return _json(self._issue_json(full_name, self._issue_of(full_name, number)))

    def _list_labels(self, full_name: str) -> Response:
        names = [label["name"] for label in self._repos[full_name]["labels"].values()]
        return self._paged(names, lambda page: self._labels_json(full_name, page))

    def _create_label(self, full_name: str) -> Response:
        spec = request.get_json(silent=True) or {}
        label_name, color = spec.get("name"), spec.get("color", NEW_LABEL_COLOR)
        if not label_name:
            code, field = "missing_field", "name"
        elif label_name.lower() in self._repos[full_name]["labels"]:
            code, field = "already_exists", "name"
        elif not re.fullmatch(r"[0-9a-fA-F]{6}", color):
            code, field = "invalid", "color"
        else:
            label = self._label(full_name, label_name, color, spec.get("description"))
            return _json(_label_json(self.url, full_name, label), 201)
        return _error(422, "Validation Failed", errors=[{"resource": "Label", "code": code, "field": field}])

    def _list_issue_types(self, full_name: str) -> Response:
        types = self._repos[full_name]["issue_types"]
        return _json(types) if types else _error(404, "Not Found")

    def _update_issue(self, full_name: str, number: int) -> Response:
        """PATCH an issue: the fake knows `type` (a type name, or None to remove it)."""
        issue, body = self._issue_of(full_name, number), request.get_json(silent=True) or {}
        if "type" in body:
            types = self._repos[full_name]["issue_types"]
            found = [t for t in types if body["type"] and t["name"].lower() == str(body["type"]).lower()]
            if body["type"] is not None and not found:
                return _error(422, "Validation Failed", errors=[{"resource": "Issue", "field": "type",
                                                                  "code": "invalid"}])
            issue["type"] = found[0] if found else None
        return _json(self._issue_json(full_name, issue))

    def issue_type(self, full_name: str, number: int) -> str | None:
        """The name of the issue's type, None when it has none."""
        with self._lock:
            return (self._repos[full_name]["issues"][number].get("type") or {}).get("name")

    def _add_labels(self, full_name: str, number: int) -> Response:
        """Body is a bare list (what PyGithub sends) or {"labels": [...]}; unknown labels are created."""
        issue, body = self._issue_of(full_name, number), request.get_json(silent=True)
        names = body.get("labels") if isinstance(body, dict) else body
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return _error(422, "Invalid request.")
        for label in (self._label(full_name, n)["name"] for n in names):
            if label not in issue["labels"]:
                issue["labels"].append(label)
        return _json(self._labels_json(full_name, issue["labels"]))

    def _remove_label(self, full_name: str, number: int, label: str) -> Response:
        issue = self._issue_of(full_name, number)  # no such issue: GitHub's "Not Found"
        present = [n for n in issue["labels"] if n.lower() == label.lower()]
        if not present:  # the issue is there, the label is not on it
            return _error(404, "Label does not exist")
        issue["labels"].remove(present[0])
        return _json(self._labels_json(full_name, issue["labels"]))

    def _create_comment(self, full_name: str, number: int) -> Response:
        issue, body = self._issue_of(full_name, number), (request.get_json(silent=True) or {}).get("body")
        if not isinstance(body, str):
            return _error(422, "Invalid request.")
        cid, now = next(self._ids), _timestamp(time.time())
        url = f"{self.url}/repos/{full_name}/issues/comments/{cid}"
        comment = {"url": url, "html_url": f"{WEB_URL}/{full_name}/issues/{number}#issuecomment-{cid}",
                   "issue_url": f"{self.url}/repos/{full_name}/issues/{number}", "id": cid,
                   "node_id": f"IC_{cid}", "user": _user_json(self.url, "issue-sorter[bot]", "Bot"),
                   "created_at": now, "updated_at": now, "author_association": "NONE", "body": body,
                   "reactions": _reactions(f"{url}/reactions"), "performed_via_github_app": None}
        issue["comments"].append(comment)
        return _json(comment, 201)

    def _list_comments(self, full_name: str, number: int) -> Response:
        return self._paged(self._issue_of(full_name, number)["comments"])

    def _create_reaction(self, full_name: str, comment_id: int) -> Response:
        """POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions: 201 with the reaction, 200 when
        this user already reacted so. The fake keeps no users' comments, so any id of a known repo is one."""
        content = (request.get_json(silent=True) or {}).get("content")
        if content not in REACTIONS:
            return _error(422, "Validation Failed", errors=[{"resource": "Reaction", "code": "invalid",
                                                             "field": "content"}])
        reactions = self._reactions.setdefault((full_name, comment_id), [])
        user = _user_json(self.url, "issue-sorter[bot]", "Bot")
        for reaction in reactions:
            if reaction["content"] == content and reaction["user"]["login"] == user["login"]:
                return _json(reaction, 200)
        rid = next(self._ids)
        reaction = {"id": rid, "node_id": f"REA_{rid}", "user": user, "content": content,
                    "created_at": _timestamp(time.time())}
        reactions.append(reaction)
        return _json(reaction, 201)

    def _permission(self, full_name: str, login: str) -> Response:
        # Someone who is not a collaborator reads as "none", as on a private repository.
        role = self._role(full_name, login)
        user = {**_user_json(self.url, login), "permissions": _permission_levels(role), "role_name": role}
        return _json({"permission": ROLE_PERMISSION.get(role, "none"), "role_name": role, "user": user})

    def _contents(self, full_name: str, path: str) -> Response:
        allowed = self._single_files.get(self._repos[full_name]["installation_id"])
        if allowed is not None and path not in allowed:
            return _error(403, "Resource not accessible by integration")
        text = self._repos[full_name]["files"].get(path)
        inside = sorted(other for other in self._repos[full_name]["files"] if other.startswith(path.rstrip("/") + "/"))
        if text is None and inside:  # a folder: GitHub lists what is in it
            return _json([{"type": "file" if "/" not in other[len(path) + 1:] else "dir",
                           "name": other[len(path) + 1:].split("/")[0], "path": other} for other in inside])
        if text is None:
            return _error(404, "Not Found")
        raw = text if isinstance(text, bytes) else text.encode()
        sha = hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()  # git's blob SHA, as GitHub's
        url = f"{self.url}/repos/{full_name}/contents/{path}"
        git, html = f"{self.url}/repos/{full_name}/git/blobs/{sha}", f"{WEB_URL}/{full_name}/blob/main/{path}"
        too_big = len(raw) > CONTENTS_MAX_BYTES  # GitHub then sends an empty content with encoding "none"
        content, encoding = ("", "none") if too_big else (base64.encodebytes(raw).decode(), "base64")
        etag = f'W/"{sha}"'  # GitHub's is a digest of the answer; the blob SHA changes with it here
        if etag in request.headers.get("If-None-Match", ""):
            return Response(status=304, headers={"ETag": etag})
        return _json({"type": "file", "encoding": encoding, "size": len(raw), "name": path.rsplit("/", 1)[-1],
                      "path": path, "content": content, "sha": sha, "url": url,
                      "git_url": git, "html_url": html,
                      "download_url": f"https://raw.githubusercontent.com/{full_name}/main/{path}",
                      "_links": {"self": url, "git": git, "html": html}}, headers={"ETag": etag})

    # --- the App's OAuth client and its user tokens ------------------------------------------------
    def _oauth_authorize(self) -> Response:
        """github.com's consent page, approved at once by the signed-in test user."""
        client_id, redirect_uri = request.args.get("client_id", ""), request.args.get("redirect_uri", "")
        if client_id not in self._oauth_clients or not redirect_uri.startswith(("http://", "https://")):
            return Response("Not Found", 404, content_type="text/html; charset=utf-8")
        if self._signing_in is None:
            return Response("Sign in to GitHub", 200, content_type="text/html; charset=utf-8")
        code = secrets.token_hex(10)
        self._codes[code] = (self._signing_in, client_id)
        state = {"state": request.args["state"]} if "state" in request.args else {}
        query = urlencode({"code": code, **state})
        separator = "&" if "?" in redirect_uri else "?"
        return Response("", 302, headers={"Location": f"{redirect_uri}{separator}{query}"})

    def _oauth_access_token(self) -> Response:
        """Exchange a code for a user token; errors come back as 200 with `error`, as on GitHub."""
        form = (request.get_json(silent=True) if request.is_json else request.form.to_dict()) or {}
        client_id, secret, code = form.get("client_id"), form.get("client_secret"), form.get("code")
        if client_id not in self._oauth_clients or self._oauth_clients[client_id] != secret:
            body = {"error": "incorrect_client_credentials",
                    "error_description": "The client_id and/or client_secret passed are incorrect."}
        elif code not in self._codes or self._codes[code][1] != client_id:
            body = {"error": "bad_verification_code",
                    "error_description": "The code passed is incorrect or expired."}
        else:
            login, _ = self._codes.pop(code)
            token = self.user_token_for(login)
            body = {"access_token": token, "expires_in": USER_TOKEN_TTL,
                    "refresh_token": f"ghr_{secrets.token_hex(30)}", "refresh_token_expires_in": 15897600,
                    "scope": "", "token_type": "bearer"}
        if "application/json" in request.headers.get("Accept", ""):
            return _json(body)
        return Response(urlencode(body), 200, content_type="application/x-www-form-urlencoded; charset=utf-8")

    def _user(self) -> Response:
        login = self._user_login()
        return _json({**_user_json(self.url, login), "name": None, "company": None, "blog": "",
                      "location": None, "email": None, "hireable": None, "bio": None,
                      "twitter_username": None, "public_repos": 0, "public_gists": 0,
                      "followers": 0, "following": 0, "created_at": _timestamp(0),
                      "updated_at": _timestamp(0)})

    def _visible_repos(self, login: str, installation_id: int) -> list[str]:
        return sorted(name for name in self._installations.get(installation_id, ())
                      if self._role(name, login) != "none")

    def _user_installations(self) -> Response:
        """Installations of this App on accounts where the user can see at least one repository."""
        login = self._user_login()
        found = [(iid, self._visible_repos(login, iid)) for iid in sorted(self._installations)]
        installations = [_installation_json(self.url, iid, repos[0].split("/")[0], self.app_id)
                         for iid, repos in found if repos]
        return self._paged(installations, lambda page: {"total_count": len(installations), "installations": page})

    def _user_installation_repositories(self, installation_id: int) -> Response:
        """The installation's repositories the user can access, each with the user's `permissions`."""
        login = self._user_login()
        names = self._visible_repos(login, installation_id)
        if not names:
            return _error(404, "Not Found")
        repos = [{**_repo_json(self.url, name, self._repos[name]["id"]),
                  "permissions": _permission_levels(self._role(name, login))} for name in names]
        return self._paged(repos, lambda page: {"total_count": len(repos), "repository_selection": "selected",
                                                "repositories": page})
