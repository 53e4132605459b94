"""GitHub as the signed-in user: the OAuth web flow of the App's client, then a few reads with their token.

Plain `requests`, not PyGithub, keeps the web process light (tests/bot/intake/test_webhooks.py checks its imports).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

import requests

TIMEOUT = 10  # seconds per request: a page waits for these calls
MAX_PAGES = 10  # 1,000 installations or repositories per list is more than a reviewer's page can show
API_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}


class GitHubUserError(Exception):
    """A call as the user failed; `status` is GitHub's HTTP status (None: no answer at all)."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


def authorize_url(web_url: str, client_id: str, redirect_uri: str, state: str) -> str:
    """Where the browser goes to let the App act for the user (step 1 of GitHub's web flow)."""
    query = urlencode({"client_id": client_id, "redirect_uri": redirect_uri, "state": state})
    return f"{web_url}/login/oauth/authorize?{query}"


def exchange_code(web_url: str, client_id: str, client_secret: str, code: str, redirect_uri: str, *,
                  http: requests.Session | None = None) -> str:
    """The user token for the code GitHub sent back (step 2); GitHub reports a bad code as 200 + `error`."""
    data = {"client_id": client_id, "client_secret": client_secret, "code": code,
            "redirect_uri": redirect_uri}
    try:
        response = (http or requests).post(f"{web_url}/login/oauth/access_token", data=data, timeout=TIMEOUT,
                                           headers={"Accept": "application/json"})
    except requests.RequestException as error:
        raise GitHubUserError(f"no answer from GitHub: {type(error).__name__}") from error
    body = response.json() if response.ok else {}
    if "access_token" not in body:
        raise GitHubUserError(f"GitHub refused the sign-in: {body.get('error', response.status_code)}",
                              status=response.status_code)
    return body["access_token"]


class UserClient:
    """The REST API with one user's token (step 3 on): who they are and what they may see."""

    def __init__(self, api_url: str, token: str, *, http: requests.Session | None = None):
        self._api_url = api_url.rstrip("/")
        self._http = http or requests.Session()
        self._headers = {**API_HEADERS, "Authorization": f"Bearer {token}"}

    def user(self) -> dict[str, Any]:
        return self._get(f"{self._api_url}/user").json()

    def installations(self) -> list[dict[str, Any]]:
        """Installations of this App that the user can reach (GET /user/installations)."""
        return self._pages(f"{self._api_url}/user/installations?per_page=100", "installations")

    def installation_repositories(self, installation_id: int) -> list[dict[str, Any]]:
        """The installation's repositories the user can access, each with the user's `permissions`."""
        url = f"{self._api_url}/user/installations/{installation_id}/repositories?per_page=100"
        return self._pages(url, "repositories")

    def labels(self, repo: str) -> list[str]:
        """The repository's label names."""
        owner, name = repo.split("/", 1)
        url = f"{self._api_url}/repos/{quote(owner, safe='')}/{quote(name, safe='')}/labels?per_page=100"
        return [label["name"] for label in self._pages(url, None)]

    def _pages(self, url: str, key: str | None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            response = self._get(url)
            body = response.json()
            items += body[key] if key else body
            url = response.links.get("next", {}).get("url")
            if not url:
                break
        return items

    def _get(self, url: str) -> requests.Response:
        try:
            response = self._http.get(url, headers=self._headers, timeout=TIMEOUT)
        except requests.RequestException as error:
            raise GitHubUserError(f"no answer from GitHub: {type(error).__name__}") from error
        if not response.ok:
            raise GitHubUserError(f"GitHub answered {response.status_code}", status=response.status_code)
        return response
