"""`issue-sorter setup`: register the GitHub App through GitHub's manifest flow, as Probot does.

A page on 127.0.0.1 POSTs the manifest (app.yml, pointed at this deployment) to GitHub, which registers the App
and redirects back with a one-time code, exchanged for the App's id, secrets and private key: written to `.env`
and a key file of their own, both readable by the owner only. GitHub must reach the webhook URL: https, or a
webhook proxy channel (smee.io, or `--channel`) that `.env` keeps for `run` to relay. Without `--public-url` the
App has no sign-in callback, `.env` no OAuth client, and the review page is off (said so at the end).
"""

from __future__ import annotations

import html
import ipaddress
import json
import threading
import webbrowser
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import requests
from flask import Flask, abort, request
from werkzeug.serving import make_server

from bot.github_api.manifest import (
    CONFIG_FILE,
    build_manifest,
    credentials_from_conversion,
    load_app_yml,
    new_state,
    registration_url,
)
from issue_sorter.env_file import ENV_FILE, read_env
from issue_sorter.private_files import write_secret_file

CHANNEL_HOSTS = ("smee.io",)  # webhook proxy channels recognised by their host; `--channel` names any other
KEY_FILE = Path("var/github-app.private-key.pem")
CALLBACK = "/callback"


class SetupError(RuntimeError):
    """The registration cannot go on; the message says why and what to do."""


@dataclass
class Registration:
    """One run of the flow: what the page offers, and what came back."""

    manifest: dict
    post_to: str  # GitHub's new-App page, with our state
    state: str
    api_url: str
    web_url: str
    env_file: Path
    key_file: Path
    public_url: str | None = None  # without it: no sign-in callback, no OAuth client in .env, no review page
    channel: str | None = None  # the webhook URL, when it is a proxy channel `run` relays
    app: dict | None = None  # GitHub's answer to the conversion, once done
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None


def start_registration(app_yml: Path, *, webhook_url: str, port: int, api_url: str, web_url: str,
                       org: str | None, public_url: str | None, name: str | None = None,
                       env_file: Path = ENV_FILE, key_file: Path = KEY_FILE,
                       force: bool = False, channel: bool = False) -> Registration:
    """Everything the page needs; refuses a webhook URL GitHub cannot post to safely, a public URL that is not
    https, and to replace an App already set up in `env_file` unless forced. `channel`: the webhook URL is a
    webhook proxy channel (one on CHANNEL_HOSTS always is)."""
    channel = channel or urlsplit(webhook_url).hostname in CHANNEL_HOSTS
    problem = webhook_url_problem(webhook_url, channel=channel) or public_url_problem(public_url)
    if problem:
        raise SetupError(problem)
    if not force and "GITHUB_APP_ID" in read_env(env_file):
        raise SetupError(f"{env_file} already sets up App {read_env(env_file)['GITHUB_APP_ID']}: "
                         "pass --force to register another")
    if not app_yml.is_file():
        raise SetupError(f"no manifest at {app_yml}: run setup in a checkout, or pass --manifest FILE")
    state = new_state()
    manifest = build_manifest(load_app_yml(app_yml.read_text()), webhook_url=webhook_url,
                              redirect_url=f"http://127.0.0.1:{port}{CALLBACK}", public_url=public_url, name=name)
    return Registration(manifest, registration_url(web_url, state, org), state, api_url, web_url, env_file,
                        key_file, public_url=public_url, channel=webhook_url if channel else None)


def webhook_url_problem(url: str, *, channel: bool) -> str | None:
    """Why GitHub should not post deliveries to `url`, or None: https only (deliveries carry issue text and
    are signed, not encrypted), to a host GitHub can reach; a proxy channel may be any http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--webhook-url must be a URL such as https://HOST/webhook, not {url!r}"
    if channel:
        return None
    if parts.scheme != "https":
        return (f"--webhook-url must be https (GitHub's deliveries carry issue text): {url!r}; on a laptop, open a "
                "webhook proxy channel (https://smee.io/new) and pass its URL")
    if _is_local(parts.hostname):
        return (f"GitHub cannot reach {parts.hostname}: --webhook-url must be a public address, or a webhook proxy "
                "channel (https://smee.io/new) that `issue-sorter run` relays")
    return None


def public_url_problem(url: str | None) -> str | None:
    """Why `url` cannot be where reviewers sign in, or None: https, or http on this machine (GitHub allows a
    loopback callback)."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname or parts.scheme == "http" and _is_local(parts.hostname or ""):
        return None
    return f"--public-url must be this deployment's https://HOST (or http://localhost:PORT), not {url!r}"


def _is_local(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def create_setup_app(registration: Registration) -> Flask:
    """The two pages of the flow: the button, and the callback GitHub redirects to."""
    app = Flask(__name__)

    @app.get("/")
    def page():
        manifest = html.escape(json.dumps(registration.manifest), quote=True)
        return (f"<!doctype html><title>Register Issue Sorter</title><h1>Register Issue Sorter on GitHub</h1>"
                f"<p>GitHub will ask you to name the App and confirm; then it comes back here.</p>"
                f'<form action="{html.escape(registration.post_to)}" method="post">'
                f'<input type="hidden" name="manifest" value="{manifest}">'
                f'<button type="submit">Register the GitHub App</button></form>')

    @app.get(CALLBACK)
    def callback():
        if request.args.get("state") != registration.state or not request.args.get("code"):
            abort(400, "this is not the answer to the registration this command started")
        try:
            finish_registration(registration, request.args["code"])
        except SetupError as error:
            registration.error = str(error)
            registration.done.set()
            return f"<p>{html.escape(str(error))}</p>", 502
        install = html.escape(install_link(registration.app))
        return (f"<!doctype html><title>Issue Sorter registered</title><h1>{html.escape(registration.app['name'])}"
                f" is registered</h1><p>Settings written to {html.escape(str(registration.env_file))}.</p>"
                f'<p><a href="{install}">Install it on your repositories</a></p>')

    return app


def finish_registration(registration: Registration, code: str) -> dict:
    """Exchange the code for the App's credentials and write them; returns GitHub's answer."""
    try:
        response = requests.post(f"{registration.api_url.rstrip('/')}/app-manifests/{code}/conversions",
                                 headers={"Accept": "application/vnd.github+json"}, timeout=30)
    except requests.RequestException as error:
        raise SetupError(f"GitHub did not answer the code exchange: {type(error).__name__}") from error
    if response.status_code != 201:
        raise SetupError(f"GitHub refused the code exchange ({response.status_code}): the code lives one hour "
                         "and works once; run `issue-sorter setup` again")
    app = response.json()
    write_secret_file(registration.key_file, app["pem"])
    values = credentials_from_conversion(app, api_url=registration.api_url, web_url=registration.web_url,
                                         key_path=str(registration.key_file.resolve()),
                                         review=registration.public_url is not None)
    if registration.channel:
        values["ISSUE_SORTER_WEBHOOK_CHANNEL"] = registration.channel
    write_env(registration.env_file, values)
    registration.app = app
    registration.done.set()
    return app


def install_link(app: Mapping) -> str:
    return f"{app['html_url']}/installations/new"


def run_setup(registration: Registration, *, port: int, open_browser: bool = True,
              timeout: float | None = None) -> dict:
    """Serve the flow on 127.0.0.1:`port` until GitHub came back (or `timeout` seconds passed)."""
    server = make_server("127.0.0.1", port, create_setup_app(registration), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    page = f"http://127.0.0.1:{server.server_port}/"
    print(f"Open {page} and press the button to register Issue Sorter on GitHub.")
    if open_browser:
        webbrowser.open(page)
    try:
        if not registration.done.wait(timeout):
            raise SetupError("no answer from GitHub in time: run `issue-sorter setup` again")
    finally:
        server.shutdown()
        server.server_close()
    if registration.error:
        raise SetupError(registration.error)
    return registration.app


def write_env(path: Path, values: Mapping[str, str]) -> None:
    """Add or replace `values` in the `.env` file, keeping its other lines; the file is 0600."""
    kept = [line for line in (path.read_text().splitlines() if path.is_file() else [])
            if line.split("=", 1)[0].strip().removeprefix("export ").strip() not in values]
    for key, value in values.items():
        if "'" in value or "\n" in value:
            raise SetupError(f"{key} cannot be written to {path} as one line")
        kept.append(f"{key}='{value}'")
    write_secret_file(path, "\n".join(kept) + "\n")


def next_steps(registration: Registration, org: str | None) -> str:
    """What the maintainer does after the registration."""
    app, web = registration.app, registration.web_url.rstrip("/")
    settings = f"{web}/organizations/{org}/settings/apps/{app['slug']}" if org else f"{web}/settings/apps/{app['slug']}"
    review = ("The review page is on: reviewers sign in at "
              f"{registration.public_url.rstrip('/')}/review/" if registration.public_url else
              "The review page is off: the App was registered without --public-url, so it has no sign-in callback "
              "(run setup --force --public-url https://HOST to register one that has)")
    relay = (f"make run relays the webhook proxy channel {registration.channel} (ISSUE_SORTER_WEBHOOK_CHANNEL in "
             f"{registration.env_file})" if registration.channel else "make run (it reads .env)")
    return "\n".join([
        f"Registered {app['name']} (App {app['id']}); settings in {registration.env_file} (readable by you only).",
        f"1. Set the single file path to {CONFIG_FILE}: {settings}/permissions (Single file).",
        f"2. Install it on your repositories: {install_link(app)}",
        f"3. Start the service: {relay}.",
        review + ".",
    ])
