"""Settings for every process, read from the environment in exactly one place."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_WEB_URL = "https://github.com"
DEFAULT_DATABASE_URL = "sqlite:///var/issue-sorter.db"
DEFAULT_MODEL_DIR = "var/models"


class ConfigError(ValueError):
    """Start-up configuration is missing or malformed; the message names every problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("Configuration problems:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclasses.dataclass(frozen=True)
class Settings:
    webhook_secret: str = dataclasses.field(repr=False)  # GITHUB_WEBHOOK_SECRET: HMAC key of deliveries
    app_id: int | None = None  # GITHUB_APP_ID; with the key, enables writes to GitHub
    private_key: str | None = dataclasses.field(default=None, repr=False)  # PEM text of the App key
    api_url: str = DEFAULT_API_URL  # GITHUB_API_URL; set it for GitHub Enterprise Server
    # DATABASE_URL; SQLite under ./var by default. Either URL may hold a password: kept out of repr
    database_url: str = dataclasses.field(default=DEFAULT_DATABASE_URL, repr=False)
    # REDIS_URL, with the password of REDIS_PASSWORD_PATH's file put in; None: "start a local Redis" (run)
    redis_url: str | None = dataclasses.field(default=None, repr=False)
    port: int = 8000  # PORT of the web process
    model_dir: Path = Path(DEFAULT_MODEL_DIR)  # MODEL_DIR: root of the versioned model registry
    threshold: float = 0.5  # ISSUE_SORTER_THRESHOLD: below this top score the bot abstains
    create_labels: bool = False  # ISSUE_SORTER_CREATE_LABELS: create a missing kind label instead of abstaining
    app_slug: str | None = None  # GITHUB_APP_SLUG: our bot login is "<slug>[bot]"; recognises our own events
    # GitHub's guidance: writes at least a second apart per installation, reads serial but not spaced
    github_write_interval: float = 1.0  # GITHUB_WRITE_INTERVAL: seconds between writes of one installation
    github_read_interval: float = 0.0  # GITHUB_READ_INTERVAL: seconds between any two calls of one installation
    labels_cache_seconds: int = 3600  # ISSUE_SORTER_LABELS_CACHE_SECONDS: a repository's cached labels live this
    # long at most; `label` webhooks drop them at once
    missing_config_cache_seconds: int = 300  # ISSUE_SORTER_MISSING_CONFIG_CACHE_SECONDS: "no config file" is
    # believed this long (GitHub sends no ETag with a 404, so absence cannot be revalidated for free)
    worker_threads: int = 1  # ISSUE_SORTER_WORKER_THREADS: inference threads (torch or ORT) of a bot worker
    fresh_delivery_seconds: float = 10.0  # ISSUE_SORTER_FRESH_DELIVERY_SECONDS: a delivery's copy of the issue
    # younger than this (by the updated_at) is used as is; an older one is read again from GitHub
    retrain_interval: int = 86400  # ISSUE_SORTER_RETRAIN_INTERVAL: seconds between checks for scopes due
    redelivery_interval: int = 900  # ISSUE_SORTER_REDELIVERY_INTERVAL: seconds between redelivery sweeps
    retrain_min_new: int = 20  # ISSUE_SORTER_RETRAIN_MIN_NEW: new confirmed issues that make a scope due
    repo_min_per_label: int = 20  # ISSUE_SORTER_REPO_MIN_PER_LABEL: issues per label for a repo's own labels
    retrain_epochs: int = 2  # ISSUE_SORTER_RETRAIN_EPOCHS: epochs of each retraining run
    retrain_min_holdout: int = 50  # ISSUE_SORTER_RETRAIN_MIN_HOLDOUT: recent confirmed issues the gate judges on
    retrain_max_length: int | None = None  # ISSUE_SORTER_RETRAIN_MAX_LENGTH: tokens per issue; None: the champion's
    client_id: str | None = None  # GITHUB_CLIENT_ID: the App's OAuth client; without it the review UI is off
    client_secret: str | None = dataclasses.field(default=None, repr=False)  # GITHUB_CLIENT_SECRET
    web_url: str = DEFAULT_WEB_URL  # GITHUB_WEB_URL: where users sign in (GitHub Enterprise: its own URL)
    session_secret: str | None = dataclasses.field(default=None, repr=False)  # ISSUE_SORTER_SESSION_SECRET
    trusted_proxies: int = 0  # ISSUE_SORTER_TRUSTED_PROXIES: proxies in front whose X-Forwarded-* we believe
    admins: tuple[str, ...] = ()  # ISSUE_SORTER_ADMINS: GitHub logins who see the operator's page

    @property
    def review_enabled(self) -> bool:
        """The review UI needs the App's OAuth client and a key to sign sessions with."""
        return bool(self.client_id and self.client_secret and self.session_secret)
    # ISSUE_SORTER_SHARE_PUBLIC_DATA: a repository's model also learns from other installations' public repositories
    share_public_data: bool = False
    # ISSUE_SORTER_GLOBAL_INSTALLATIONS: installation ids (comma-separated) whose private repositories the
    # global model may learn from; without it, the global model learns from public repositories and the
    # operator's own (no installation) only
    global_installations: frozenset[int] = frozenset()
    # ISSUE_SORTER_UNCONFIRMED_RETENTION_DAYS: issue text no human confirmed a label for is cleared after
    # this many days (None: kept)
    unconfirmed_retention_days: int | None = None
    memory: bool = True  # ISSUE_SORTER_MEMORY: adjust scores by each repository's confirmed issues (core.memory)
    abstain_label: str | None = None  # ISSUE_SORTER_ABSTAIN_LABEL: label for issues the bot abstains on
    # ISSUE_SORTER_MAX_EVENT_AGE: seconds after which an issue or comment event is ignored as a replay (0: never);
    # GitHub redelivers for 3 days, plus an hour for clocks and queues (bot.queueing.REPLAY_WINDOW_SECONDS)
    max_event_age: int = 3 * 24 * 3600 + 3600

    @property
    def dry_run(self) -> bool:
        """Without App credentials we classify and store, but write nothing to GitHub."""
        return self.app_id is None or self.private_key is None

    @property
    def bot_login(self) -> str | None:
        return f"{self.app_slug}[bot]" if self.app_slug else None

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, require_webhook_secret: bool = True) -> Settings:
        """Read and validate every variable; operator commands that receive no webhooks pass
        require_webhook_secret=False."""
        problems: list[str] = []
        values: dict = {}
        values["webhook_secret"] = _read_webhook_secret(environ, problems, required=require_webhook_secret)
        values.update(_read_app_credentials(environ, problems))
        values["api_url"] = environ.get("GITHUB_API_URL", DEFAULT_API_URL).rstrip("/")
        if not values["api_url"].startswith(("http://", "https://")):
            problems.append(f"GITHUB_API_URL must be an http(s) URL, got {values['api_url']!r}")
        values["database_url"] = environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
        if "://" not in values["database_url"]:
            problems.append("DATABASE_URL must be a SQLAlchemy URL such as postgresql+psycopg://host/db")
        values["redis_url"] = _read_redis_url(environ, problems)
        values["port"] = _parse(environ, "PORT", int, 8000, problems)
        values["model_dir"] = Path(environ.get("MODEL_DIR") or DEFAULT_MODEL_DIR)
        values["threshold"] = _parse(environ, "ISSUE_SORTER_THRESHOLD", float, 0.5, problems)
        if not 0.0 <= values["threshold"] <= 1.0:
            problems.append("ISSUE_SORTER_THRESHOLD must be between 0 and 1")
        values["create_labels"] = _flag(environ, "ISSUE_SORTER_CREATE_LABELS")
        values["app_slug"] = environ.get("GITHUB_APP_SLUG") or None
        values.update(_read_github_pacing(environ, problems))
        values["worker_threads"] = _parse(environ, "ISSUE_SORTER_WORKER_THREADS", int, 1, problems)
        if values["worker_threads"] < 1:
            problems.append("ISSUE_SORTER_WORKER_THREADS must be at least 1")
        values["retrain_interval"] = _parse(environ, "ISSUE_SORTER_RETRAIN_INTERVAL", int, 86400, problems)
        values["redelivery_interval"] = _parse(environ, "ISSUE_SORTER_REDELIVERY_INTERVAL", int, 900,
                                               problems)
        if values["redelivery_interval"] <= 0:
            problems.append("ISSUE_SORTER_REDELIVERY_INTERVAL must be a positive number of seconds")
        values["retrain_min_new"] = _parse(environ, "ISSUE_SORTER_RETRAIN_MIN_NEW", int, 20, problems)
        values["repo_min_per_label"] = _parse(environ, "ISSUE_SORTER_REPO_MIN_PER_LABEL", int, 20, problems)
        values["retrain_epochs"] = _parse(environ, "ISSUE_SORTER_RETRAIN_EPOCHS", int, 2, problems)
        values["retrain_min_holdout"] = _parse(environ, "ISSUE_SORTER_RETRAIN_MIN_HOLDOUT", int, 50, problems)
        if values["retrain_min_holdout"] < 1:
            problems.append("ISSUE_SORTER_RETRAIN_MIN_HOLDOUT must be at least 1")
        values["retrain_max_length"] = _parse(environ, "ISSUE_SORTER_RETRAIN_MAX_LENGTH", int, None, problems)
        values.update(_read_review_settings(environ, problems))
        values["admins"] = tuple(login.strip() for login in environ.get("ISSUE_SORTER_ADMINS", "").split(",")
                                 if login.strip())
        values.update(_read_data_sharing(environ, problems))
        values["memory"] = environ.get("ISSUE_SORTER_MEMORY", "").lower() not in {"0", "false", "no", "off"}
        values["abstain_label"] = environ.get("ISSUE_SORTER_ABSTAIN_LABEL", "").strip() or None
        values["max_event_age"] = _parse(environ, "ISSUE_SORTER_MAX_EVENT_AGE", int, cls.max_event_age, problems)
        if values["max_event_age"] < 0:
            problems.append("ISSUE_SORTER_MAX_EVENT_AGE must be 0 (no limit) or a positive number of seconds")
        if problems:
            raise ConfigError(problems)
        return cls(**values)


def _read_data_sharing(environ: Mapping[str, str], problems: list[str]) -> dict:
    """Whose data each model may learn from, and how long unconfirmed issue text is kept."""
    raw_ids = [part.strip() for part in environ.get("ISSUE_SORTER_GLOBAL_INSTALLATIONS", "").split(",")]
    bad = [part for part in raw_ids if part and not part.isdigit()]
    if bad:
        problems.append(f"ISSUE_SORTER_GLOBAL_INSTALLATIONS must be installation ids separated by commas, "
                        f"got {', '.join(repr(part) for part in bad)}")
    days = _parse(environ, "ISSUE_SORTER_UNCONFIRMED_RETENTION_DAYS", int, None, problems)
    if days is not None and days <= 0:
        problems.append("ISSUE_SORTER_UNCONFIRMED_RETENTION_DAYS must be a positive number of days")
    return {"share_public_data": _flag(environ, "ISSUE_SORTER_SHARE_PUBLIC_DATA"),
            "global_installations": frozenset(int(part) for part in raw_ids if part.isdigit()),
            "unconfirmed_retention_days": days}


def _flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").lower() in {"1", "true", "yes"}


GITHUB_PACING = (  # (setting, variable, type, default)
    ("github_write_interval", "GITHUB_WRITE_INTERVAL", float, 1.0),
    ("github_read_interval", "GITHUB_READ_INTERVAL", float, 0.0),
    ("labels_cache_seconds", "ISSUE_SORTER_LABELS_CACHE_SECONDS", int, 3600),
    ("missing_config_cache_seconds", "ISSUE_SORTER_MISSING_CONFIG_CACHE_SECONDS", int, 300),
    ("fresh_delivery_seconds", "ISSUE_SORTER_FRESH_DELIVERY_SECONDS", float, 10.0),
)


def _read_github_pacing(environ: Mapping[str, str], problems: list[str]) -> dict:
    """The client-side throttle and the caches of GitHub reads; every value is a number of seconds >= 0."""
    if environ.get("GITHUB_REQUEST_INTERVAL"):
        problems.append("GITHUB_REQUEST_INTERVAL is no longer read: GITHUB_WRITE_INTERVAL spaces writes "
                        "(default 1 s, GitHub's advice) and GITHUB_READ_INTERVAL every call (default 0)")
    values = {}
    for name, variable, kind, default in GITHUB_PACING:
        values[name] = _parse(environ, variable, kind, default, problems)
        if values[name] < 0:
            problems.append(f"{variable} must not be negative")
    return values


def _parse(environ: Mapping[str, str], name: str, kind: type, default, problems: list[str]):
    raw = environ.get(name)
    if raw in (None, ""):
        return default
    try:
        return kind(raw)
    except ValueError:
        problems.append(f"{name} must be {'an integer' if kind is int else 'a number'}, got {raw!r}")
        return default


def _read_webhook_secret(environ: Mapping[str, str], problems: list[str], *, required: bool) -> str:
    secret = environ.get("GITHUB_WEBHOOK_SECRET", "")
    path = environ.get("GITHUB_WEBHOOK_SECRET_PATH", "")
    if not secret and path:
        unreadable = len(problems)
        secret = _read_file(environ, "GITHUB_WEBHOOK_SECRET_PATH", problems).strip()  # `echo` adds a newline
        unreadable = len(problems) > unreadable
        if not secret and required and not unreadable:
            problems.append(f"GITHUB_WEBHOOK_SECRET_PATH names an empty file ({path})")
    elif not secret and required:
        problems.append("GITHUB_WEBHOOK_SECRET is not set (the secret you gave GitHub for webhooks; "
                        "or GITHUB_WEBHOOK_SECRET_PATH, a file that holds it)")
    return secret


def _read_redis_url(environ: Mapping[str, str], problems: list[str]) -> str | None:
    """REDIS_URL, with the password from the file REDIS_PASSWORD_PATH names (a mounted secret) put in."""
    url = environ.get("REDIS_URL") or None
    if url and not url.startswith(("redis://", "rediss://", "unix://")):
        problems.append("REDIS_URL must start with redis://, rediss:// or unix://")
        return url
    password = _read_file(environ, "REDIS_PASSWORD_PATH", problems).strip()
    if not password:
        return url
    parts = urlsplit(url or "")
    if not url or parts.password or parts.scheme == "unix":
        problems.append("REDIS_PASSWORD_PATH needs a REDIS_URL redis://[USER@]HOST:PORT/DB without a password")
        return url
    user = quote(parts.username or "default", safe="")
    netloc = f"{user}:{quote(password, safe='')}@{parts.netloc.rpartition('@')[2]}"
    return urlunsplit(parts._replace(netloc=netloc))


def _read_app_credentials(environ: Mapping[str, str], problems: list[str]) -> dict:
    raw_id = environ.get("GITHUB_APP_ID", "")
    key = environ.get("GITHUB_PRIVATE_KEY", "")
    key_path = environ.get("GITHUB_PRIVATE_KEY_PATH", "")
    app_id = None
    if raw_id:
        if raw_id.isdigit():
            app_id = int(raw_id)
        else:
            problems.append(f"GITHUB_APP_ID must be the App's numeric id, got {raw_id!r}")
    if key_path and not key:
        key = _read_file(environ, "GITHUB_PRIVATE_KEY_PATH", problems)
    if key and "-----BEGIN" not in key:
        problems.append("GITHUB_PRIVATE_KEY is not PEM text (expected '-----BEGIN ... PRIVATE KEY-----')")
    if bool(raw_id) != bool(key or key_path):
        problems.append("GITHUB_APP_ID and GITHUB_PRIVATE_KEY (or GITHUB_PRIVATE_KEY_PATH) must be set together")
    return {"app_id": app_id, "private_key": key or None}


def _secret(environ: Mapping[str, str], name: str, problems: list[str]) -> str | None:
    """A secret from `name`, else from the file `name`_PATH names (a mounted secret); None when neither."""
    return environ.get(name) or _read_file(environ, f"{name}_PATH", problems).strip() or None


def _read_file(environ: Mapping[str, str], name: str, problems: list[str]) -> str:
    """The text of the file that variable `name` names (a mounted secret); "" when unset or unreadable."""
    path = environ.get(name, "")
    if not path:
        return ""
    try:
        return Path(path).read_text()
    except OSError as error:
        problems.append(f"{name} cannot be read: {error.strerror} ({path})")
        return ""


def _read_review_settings(environ: Mapping[str, str], problems: list[str]) -> dict:
    values = {"client_id": environ.get("GITHUB_CLIENT_ID") or None,
              "client_secret": _secret(environ, "GITHUB_CLIENT_SECRET", problems),
              "web_url": (environ.get("GITHUB_WEB_URL") or DEFAULT_WEB_URL).rstrip("/"),
              "session_secret": _secret(environ, "ISSUE_SORTER_SESSION_SECRET", problems),
              "trusted_proxies": _parse(environ, "ISSUE_SORTER_TRUSTED_PROXIES", int, 0, problems)}
    if bool(values["client_id"]) != bool(values["client_secret"]):
        problems.append("GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET (the App's OAuth client) must be set "
                        "together")
    if not values["web_url"].startswith(("http://", "https://")):
        problems.append(f"GITHUB_WEB_URL must be an http(s) URL, got {values['web_url']!r}")
    if values["client_id"] and not values["session_secret"]:
        problems.append("ISSUE_SORTER_SESSION_SECRET is not set (the key that signs review sessions; "
                        "`issue-sorter run` generates one)")
    if values["session_secret"] and len(values["session_secret"]) < 32:
        problems.append("ISSUE_SORTER_SESSION_SECRET must be at least 32 characters")
    if values["trusted_proxies"] < 0:
        problems.append("ISSUE_SORTER_TRUSTED_PROXIES must be 0 or more")
    return values
