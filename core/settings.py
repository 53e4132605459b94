"""Settings for every process, read from the environment in exactly one place."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from core.engines import CHOICES as ENGINE_CHOICES
from core.engines import ENGINES

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_WEB_URL = "https://github.com"
DEFAULT_DATABASE_URL = "sqlite:///var/issue-sorter.db"
DEFAULT_MODEL_DIR = "var/models"


class ConfigError(ValueError):
    """Start-up configuration is missing or malformed; the message names every problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("Configuration problems:\n" + "\n".join(f"  - {p}" for p in problems))


def env(variable: str, default, *, check: Callable[[object], str | None] | None = None):
    """A setting read from `variable`, parsed by its field's type (int, float, bool, str, Path, or
    `X | None`) with `default` when unset or empty; `check(value)` names what is wrong, or None."""
    return dataclasses.field(default=default, metadata={"env": variable, "check": check})


def _rule(holds: Callable[[float], bool], problem: str) -> Callable[[object], str | None]:
    return lambda value: None if value is None or holds(value) else problem


_NOT_NEGATIVE = _rule(lambda v: v >= 0, "must not be negative")
_AT_LEAST_ONE = _rule(lambda v: v >= 1, "must be at least 1")
_FRACTION = _rule(lambda v: 0.0 <= v <= 1.0, "must be between 0 and 1")
_POSITIVE_SECONDS = _rule(lambda v: v > 0, "must be a positive number of seconds")
_PORT = _rule(lambda v: 1 <= v <= 65535, "must be a port from 1 to 65535")
_LABEL = _rule(lambda v: 0 < len(v) <= 50 and v.strip() == v,  # GitHub's longest label name
               "must be a label name of 1 to 50 characters without surrounding spaces")


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting once: its type, default, environment variable and check (`env`); the few that are
    read by hand (secrets, URLs, lists) say so with their variables. docs/CONFIG.md's table lists them all."""

    webhook_secret: str = dataclasses.field(repr=False)  # GITHUB_WEBHOOK_SECRET(_PATH): HMAC key of deliveries
    app_id: int | None = None  # GITHUB_APP_ID; with the key, enables writes to GitHub
    private_key: str | None = dataclasses.field(default=None, repr=False)  # GITHUB_PRIVATE_KEY(_PATH): PEM text
    api_url: str = DEFAULT_API_URL  # GITHUB_API_URL; set it for GitHub Enterprise Server
    # DATABASE_URL; SQLite under ./var by default. Either URL may hold a password: kept out of repr
    database_url: str = dataclasses.field(default=DEFAULT_DATABASE_URL, repr=False)
    # REDIS_URL, with the password of REDIS_PASSWORD_PATH's file put in; None: "start a local Redis" (run)
    redis_url: str | None = dataclasses.field(default=None, repr=False)
    port: int = env("PORT", 8000, check=_PORT)  # of the web process
    model_dir: Path = env("MODEL_DIR", Path(DEFAULT_MODEL_DIR))  # root of the versioned model registry
    threshold: float = env("ISSUE_SORTER_THRESHOLD", 0.5, check=_FRACTION)  # below this top score: abstain
    create_labels: bool = env("ISSUE_SORTER_CREATE_LABELS", False)  # create a missing kind label, not abstain
    app_slug: str | None = env("GITHUB_APP_SLUG", None)  # our bot login is "<slug>[bot]": our own events
    # GitHub's guidance: writes at least a second apart per installation, reads serial but not spaced
    github_write_interval: float = env("GITHUB_WRITE_INTERVAL", 1.0, check=_NOT_NEGATIVE)  # s between writes
    github_read_interval: float = env("GITHUB_READ_INTERVAL", 0.0, check=_NOT_NEGATIVE)  # s between any calls
    # a repository's cached labels live this long at most; `label` webhooks drop them at once
    labels_cache_seconds: int = env("ISSUE_SORTER_LABELS_CACHE_SECONDS", 3600, check=_NOT_NEGATIVE)
    # "no config file" is believed this long (GitHub sends no ETag with a 404: absence cannot be revalidated)
    missing_config_cache_seconds: int = env("ISSUE_SORTER_MISSING_CONFIG_CACHE_SECONDS", 300, check=_NOT_NEGATIVE)
    # a sender's permission on a repository (whether their decisions teach the App, whether they may give
    # commands) is asked of GitHub once per repository and login in this long; a permission taken away on
    # GitHub stops counting within it
    permission_cache_seconds: int = env("ISSUE_SORTER_PERMISSION_CACHE_SECONDS", 600, check=_NOT_NEGATIVE)
    worker_threads: int = env("ISSUE_SORTER_WORKER_THREADS", 1, check=_AT_LEAST_ONE)  # a bot worker's inference
    # model passes at once on this machine, across every worker (core.inference_slots); unset: one per
    # worker_threads cores, 0: no limit
    inference_slots: int | None = env("ISSUE_SORTER_INFERENCE_SLOTS", None, check=_NOT_NEGATIVE)
    # a delivery's copy of the issue younger than this (its updated_at) is used as is; older is read again
    fresh_delivery_seconds: float = env("ISSUE_SORTER_FRESH_DELIVERY_SECONDS", 10.0, check=_NOT_NEGATIVE)
    # labelling workers `issue-sorter run` starts: one model each, each with worker_threads inference threads
    labelling_workers: int = env("ISSUE_SORTER_LABELLING_WORKERS", 1, check=_AT_LEAST_ONE)
    # s between checks for scopes due
    retrain_interval: int = env("ISSUE_SORTER_RETRAIN_INTERVAL", 86400, check=_POSITIVE_SECONDS)
    redelivery_interval: int = env("ISSUE_SORTER_REDELIVERY_INTERVAL", 900, check=_POSITIVE_SECONDS)  # s between sweeps
    # new confirmed issues that make a scope due
    retrain_min_new: int = env("ISSUE_SORTER_RETRAIN_MIN_NEW", 20, check=_AT_LEAST_ONE)
    # per label, for a repo's own labels
    repo_min_per_label: int = env("ISSUE_SORTER_REPO_MIN_PER_LABEL", 20, check=_AT_LEAST_ONE)
    retrain_epochs: int = env("ISSUE_SORTER_RETRAIN_EPOCHS", 2, check=_AT_LEAST_ONE)  # of each retraining run
    retrain_min_holdout: int = env("ISSUE_SORTER_RETRAIN_MIN_HOLDOUT", 50, check=_AT_LEAST_ONE)  # the gate's issues
    # tokens; None: the champion's
    retrain_max_length: int | None = env("ISSUE_SORTER_RETRAIN_MAX_LENGTH", None, check=_AT_LEAST_ONE)
    client_id: str | None = None  # GITHUB_CLIENT_ID: the App's OAuth client; without it the review UI is off
    client_secret: str | None = dataclasses.field(default=None, repr=False)  # GITHUB_CLIENT_SECRET(_PATH)
    web_url: str = DEFAULT_WEB_URL  # GITHUB_WEB_URL: where users sign in (GitHub Enterprise: its own URL)
    session_secret: str | None = dataclasses.field(default=None, repr=False)  # ISSUE_SORTER_SESSION_SECRET(_PATH)
    # proxies in front whose X-Forwarded-* headers we believe
    trusted_proxies: int = env("ISSUE_SORTER_TRUSTED_PROXIES", 0, check=_rule(lambda v: v >= 0, "must be 0 or more"))
    # ISSUE_SORTER_ADMINS: who sees the operator's page, as GitHub user ids; a login given instead is bound
    # to the first account that signs in with it (bot.review.admins): logins change hands, ids do not
    admins: tuple[str, ...] = ()
    # ISSUE_SORTER_METRICS_TOKEN(_PATH): the bearer token Prometheus sends for /metrics and the full /healthz;
    # without it /metrics is off (404) and /healthz says only whether the database and Redis answer
    metrics_token: str | None = dataclasses.field(default=None, repr=False)
    # seconds one web process reuses its slow figures (predictions by outcome, live workers) between scrapes
    metrics_cache_seconds: int = env("ISSUE_SORTER_METRICS_CACHE_SECONDS", 30, check=_NOT_NEGATIVE)
    # quotas per installation (core.quotas): one installation's many repositories cannot take every worker
    # a repository model per repository, and at most this many repositories of one installation have one
    max_repository_models: int = env("ISSUE_SORTER_MAX_REPOSITORY_MODELS", 5, check=_AT_LEAST_ONE)
    # trainings of one installation's repositories in 24 h; one more waits for the next due-retraining run
    max_trainings_per_day: int = env("ISSUE_SORTER_MAX_TRAININGS_PER_DAY", 3, check=_AT_LEAST_ONE)
    # memory fills of one installation waiting in the feedback queue at once; more wait their turn
    max_queued_memory_fills: int = env("ISSUE_SORTER_MAX_QUEUED_MEMORY_FILLS", 2, check=_AT_LEAST_ONE)
    # models a labelling worker keeps loaded (the global one and repositories'); the least recently used leaves
    max_loaded_models: int = env("ISSUE_SORTER_MAX_LOADED_MODELS", 3, check=_AT_LEAST_ONE)

    @property
    def review_enabled(self) -> bool:
        """The review UI needs the App's OAuth client and a key to sign sessions with."""
        return bool(self.client_id and self.client_secret and self.session_secret)
    # a repository's model also learns from other installations' public repositories
    share_public_data: bool = env("ISSUE_SORTER_SHARE_PUBLIC_DATA", False)
    # ISSUE_SORTER_GLOBAL_INSTALLATIONS: installation ids (comma-separated) whose private repositories the
    # global model may learn from; without it, the global model learns from public repositories and the
    # operator's own (no installation) only
    global_installations: frozenset[int] = frozenset()
    # the most of the global model's training and gate issues one repository or one installation supplies
    global_max_share: float = env("ISSUE_SORTER_GLOBAL_MAX_SHARE", 0.25, check=_FRACTION)
    # labelled issues (any `train` file format) the global model is judged on, instead of the newest confirmed
    global_gate_file: Path | None = env("ISSUE_SORTER_GLOBAL_GATE_FILE", None)
    # issue text no human confirmed a label for is cleared after this many days (None: kept)
    unconfirmed_retention_days: int | None = env("ISSUE_SORTER_UNCONFIRMED_RETENTION_DAYS", None,
                                                 check=_rule(lambda v: v > 0, "must be a positive number of days"))
    memory: bool = env("ISSUE_SORTER_MEMORY", True)  # adjust scores by each repository's confirmed issues
    # the engine a bot worker serves encoders with: auto (this CPU's fastest by its flags, among those the gate
    # allowed), measure (each allowed one timed on a few issues at worker start: seconds, and every engine
    # loaded) or one of core.engines.ENGINES, still only when its gate passed; else the next, logged
    engine: str = env("ISSUE_SORTER_ENGINE", "auto", check=lambda v: None if v in ENGINE_CHOICES else
                      f"must be auto, measure or one of {', '.join(ENGINES)}")
    # label for issues the bot abstains on
    abstain_label: str | None = env("ISSUE_SORTER_ABSTAIN_LABEL", None, check=_LABEL)
    # seconds after which an issue or comment event is ignored as a replay (0: never); GitHub redelivers for
    # 3 days, plus an hour for clocks and queues (bot.intake.queueing.REPLAY_WINDOW_SECONDS)
    max_event_age: int = env("ISSUE_SORTER_MAX_EVENT_AGE", 3 * 24 * 3600 + 3600,
                             check=_rule(lambda v: v >= 0, "must be 0 (no limit) or a positive number of seconds"))
    # a webhook proxy channel (https://smee.io/...) GitHub posts to: `run` relays it to the receiver
    # (`issue-sorter setup` stores it in .env when the webhook URL is one)
    webhook_channel: str | None = env("ISSUE_SORTER_WEBHOOK_CHANNEL", None, check=lambda v: None if v is None or
                                      v.startswith(("https://", "http://")) else "must be the channel's http(s) URL")

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
        values: dict = {field.name: _read_setting(environ, field, problems) for field in dataclasses.fields(cls)
                        if "env" in field.metadata}
        values["webhook_secret"] = _read_webhook_secret(environ, problems, required=require_webhook_secret)
        values.update(_read_app_credentials(environ, problems))
        values["api_url"] = environ.get("GITHUB_API_URL", DEFAULT_API_URL).rstrip("/")
        if not values["api_url"].startswith(("http://", "https://")):
            problems.append(f"GITHUB_API_URL must be an http(s) URL, got {values['api_url']!r}")
        values["database_url"] = environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
        if "://" not in values["database_url"]:
            problems.append("DATABASE_URL must be a SQLAlchemy URL such as postgresql+psycopg://host/db")
        values["redis_url"] = _read_redis_url(environ, problems)
        if environ.get("GITHUB_REQUEST_INTERVAL"):
            problems.append("GITHUB_REQUEST_INTERVAL is no longer read: GITHUB_WRITE_INTERVAL spaces writes "
                            "(default 1 s, GitHub's advice) and GITHUB_READ_INTERVAL every call (default 0)")
        values.update(_read_review_settings(environ, problems))
        values["admins"] = tuple(login.strip() for login in environ.get("ISSUE_SORTER_ADMINS", "").split(",")
                                 if login.strip())
        values["global_installations"] = _read_installation_ids(environ, problems)
        values["metrics_token"] = _secret(environ, "ISSUE_SORTER_METRICS_TOKEN", problems)
        if values["metrics_token"] and len(values["metrics_token"]) < 16:
            problems.append("ISSUE_SORTER_METRICS_TOKEN must be at least 16 characters")
        if problems:
            raise ConfigError(problems)
        return cls(**values)


TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}
PREFIX = "ISSUE_SORTER_"
# this prefix's variables read by hand in from_env (with their secrets' _PATH forms), and elsewhere: the first
# model's data (trainer.bootstrap), where ../shared is (trainer.sources), and where `run` tells its children
# the generated webhook secret is (issue_sorter.run)
READ_BY_HAND = frozenset({"ISSUE_SORTER_SESSION_SECRET", "ISSUE_SORTER_SESSION_SECRET_PATH", "ISSUE_SORTER_ADMINS",
                          "ISSUE_SORTER_GLOBAL_INSTALLATIONS", "ISSUE_SORTER_METRICS_TOKEN",
                          "ISSUE_SORTER_METRICS_TOKEN_PATH"})
READ_ELSEWHERE = frozenset({"ISSUE_SORTER_BOOTSTRAP_DATA", "ISSUE_SORTER_SHARED", "ISSUE_SORTER_SECRET_SOURCE"})


def known_variables() -> frozenset[str]:
    """Every ISSUE_SORTER_* variable some part of the App reads."""
    declared = {field.metadata["env"] for field in dataclasses.fields(Settings) if "env" in field.metadata}
    return frozenset({name for name in declared if name.startswith(PREFIX)} | READ_BY_HAND | READ_ELSEWHERE)


def unknown_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """{name: what to say} of the ISSUE_SORTER_* variables set that nothing reads (a typo would leave the
    default on, silently), each with the known one it most likely misspells."""
    known, found = known_variables(), {}
    for name in sorted(variable for variable in environ if variable.startswith(PREFIX) and variable not in known):
        # compared without the prefix every one shares, which would make any two look alike
        meant = difflib.get_close_matches(name.removeprefix(PREFIX), [k.removeprefix(PREFIX) for k in known], n=1)
        found[name] = f"{name} is not read by Issue Sorter" + (f" (did you mean {PREFIX}{meant[0]}?)" if meant
                                                               else "")
    return found


def _read_setting(environ: Mapping[str, str], field: dataclasses.Field, problems: list[str]):
    """One `env` setting: its variable parsed by the field's type, its default when unset, then checked."""
    variable, raw = field.metadata["env"], environ.get(field.metadata["env"], "").strip()
    if not raw:
        return field.default
    kind = field.type.removesuffix(" | None")
    if kind == "bool":
        if raw.lower() not in TRUE | FALSE:
            problems.append(f"{variable} must be true or false, got {raw!r}")
            return field.default
        value = raw.lower() in TRUE
    elif kind in ("int", "float"):
        try:
            value = int(raw) if kind == "int" else float(raw)
        except ValueError:
            problems.append(f"{variable} must be {'an integer' if kind == 'int' else 'a number'}, got {raw!r}")
            return field.default
    else:
        value = Path(raw) if kind == "Path" else raw
    problem = field.metadata["check"](value) if field.metadata["check"] else None
    if problem:
        problems.append(f"{variable} {problem}, got {raw!r}")
    return value


def _read_installation_ids(environ: Mapping[str, str], problems: list[str]) -> frozenset[int]:
    """ISSUE_SORTER_GLOBAL_INSTALLATIONS: whose private repositories the global model may learn from."""
    raw_ids = [part.strip() for part in environ.get("ISSUE_SORTER_GLOBAL_INSTALLATIONS", "").split(",")]
    bad = [part for part in raw_ids if part and not part.isdigit()]
    if bad:
        problems.append(f"ISSUE_SORTER_GLOBAL_INSTALLATIONS must be installation ids separated by commas, "
                        f"got {', '.join(repr(part) for part in bad)}")
    return frozenset(int(part) for part in raw_ids if part.isdigit())


def _read_webhook_secret(environ: Mapping[str, str], problems: list[str], *, required: bool) -> str:
    unreadable = len(problems)
    secret = _secret(environ, "GITHUB_WEBHOOK_SECRET", problems) or ""  # a file's: `echo` adds a newline
    if not secret and required and len(problems) == unreadable:
        path = environ.get("GITHUB_WEBHOOK_SECRET_PATH", "")
        problems.append(f"GITHUB_WEBHOOK_SECRET_PATH names an empty file ({path})" if path else
                        "GITHUB_WEBHOOK_SECRET is not set (the secret you gave GitHub for webhooks; "
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
    key_path = environ.get("GITHUB_PRIVATE_KEY_PATH", "")
    if raw_id and not raw_id.isdigit():
        problems.append(f"GITHUB_APP_ID must be the App's numeric id, got {raw_id!r}")
    key = environ.get("GITHUB_PRIVATE_KEY", "") or _read_file(environ, "GITHUB_PRIVATE_KEY_PATH", problems)
    if key and "-----BEGIN" not in key:
        problems.append("GITHUB_PRIVATE_KEY is not PEM text (expected '-----BEGIN ... PRIVATE KEY-----')")
    if bool(raw_id) != bool(key or key_path):
        problems.append("GITHUB_APP_ID and GITHUB_PRIVATE_KEY (or GITHUB_PRIVATE_KEY_PATH) must be set together")
    return {"app_id": int(raw_id) if raw_id.isdigit() else None, "private_key": key or None}


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
              "session_secret": _secret(environ, "ISSUE_SORTER_SESSION_SECRET", problems)}
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
    return values
