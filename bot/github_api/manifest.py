"""The GitHub App manifest, from app.yml: what `issue-sorter setup` asks GitHub to register. Pure: no I/O.

GitHub's manifest flow (docs: "Registering a GitHub App from a manifest") takes these keys only; the
path of the `single_file` permission cannot be set through it, so `setup` says where to set it.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import yaml

MANIFEST_KEYS = ("name", "url", "hook_attributes", "redirect_url", "callback_urls", "setup_url", "description",
                 "public", "default_events", "default_permissions", "request_oauth_on_install", "setup_on_update")
REQUIRED = ("name", "url", "default_events", "default_permissions")
CONFIG_FILE = ".github/issue-sorter.yml"  # the one file the App reads, through `single_file: read`
OAUTH_CALLBACK = "/review/oauth/callback"  # where the review page finishes signing in
AFTER_INSTALL = "/review/"  # where GitHub sends a maintainer after installing the App


class ManifestError(ValueError):
    """app.yml cannot be turned into a manifest; the message names what is missing."""


def load_app_yml(text: str) -> dict[str, Any]:
    """app.yml's settings, checked: only keys GitHub's manifest flow knows, the required ones present."""
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ManifestError("app.yml must be a mapping of manifest settings")
    unknown = sorted(set(data) - set(MANIFEST_KEYS))
    missing = [key for key in REQUIRED if not data.get(key)]
    if unknown or missing:
        raise ManifestError("app.yml: " + "; ".join(
            ([f"not manifest keys: {', '.join(unknown)}"] if unknown else [])
            + ([f"missing: {', '.join(missing)}"] if missing else [])))
    return data


def build_manifest(app: Mapping[str, Any], *, webhook_url: str, redirect_url: str,
                   public_url: str | None = None, name: str | None = None) -> dict[str, Any]:
    """app.yml's manifest pointed at this deployment: the webhook URL GitHub posts to, the command's own
    redirect, and (with a public URL) the review page's sign-in callback and post-install page; without one,
    no sign-in callback at all (app.yml's is a placeholder, where signing in would fail at GitHub)."""
    manifest = dict(app) | {"hook_attributes": {"url": webhook_url, "active": True}, "redirect_url": redirect_url}
    manifest.pop("callback_urls", None)
    manifest.pop("setup_url", None)
    if name:
        manifest["name"] = name
    if public_url:
        base = public_url.rstrip("/")
        manifest |= {"callback_urls": [base + OAUTH_CALLBACK], "setup_url": base + AFTER_INSTALL}
    return manifest


def registration_url(web_url: str, state: str, org: str | None = None) -> str:
    """Where the manifest is POSTed: the user's or the organisation's new-App page (GitHub or GHES)."""
    base = web_url.rstrip("/")
    page = f"{base}/organizations/{quote(org, safe='')}/settings/apps/new" if org else f"{base}/settings/apps/new"
    return f"{page}?state={quote(state, safe='')}"


def new_state() -> str:
    """The value GitHub hands back with the code; the callback refuses any other (CSRF)."""
    return secrets.token_urlsafe(24)


def credentials_from_conversion(app: Mapping[str, Any], *, api_url: str, web_url: str, key_path: str,
                                review: bool = True) -> dict[str, str]:
    """The settings `issue-sorter run` needs, from GitHub's answer to the code conversion; with `review`, the
    OAuth client and the key of the review page's sessions too (registered without a public URL, the App has
    no sign-in callback: its client would only fail)."""
    values = {"GITHUB_APP_ID": str(app["id"]), "GITHUB_APP_SLUG": app["slug"],
              "GITHUB_WEBHOOK_SECRET": app["webhook_secret"], "GITHUB_PRIVATE_KEY_PATH": key_path}
    if review:
        values |= {"GITHUB_CLIENT_ID": app["client_id"], "GITHUB_CLIENT_SECRET": app["client_secret"],
                   "ISSUE_SORTER_SESSION_SECRET": secrets.token_urlsafe(48)}  # signs the review page's sessions
    if api_url.rstrip("/") != "https://api.github.com":
        values["GITHUB_API_URL"] = api_url.rstrip("/")
    if web_url.rstrip("/") != "https://github.com":
        values["GITHUB_WEB_URL"] = web_url.rstrip("/")
    return values
