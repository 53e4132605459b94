"""Per-repository settings from `.github/issue-sorter.yml` (or the org's `.github` repository).

Parsing is pure: text in, a RepoConfig and a list of problems out. A bad file never crashes a job:
its problems are logged (and commented on the issue once a day, in comment/suggest mode) and safe
defaults apply (`config_for`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field

import yaml
from redis import Redis

from bot.github_client import PermanentGitHubError
from core.kinds import KINDS

log = logging.getLogger(__name__)

CONFIG_PATH = ".github/issue-sorter.yml"
WARNED_KEY = "issue-sorter:config-warned:{}:{}"  # repo, digest of the problems: one comment a day
WARNING_MARKER = "<!-- issue-sorter:config -->"
MODES = ("label", "comment", "suggest", "off")
DEFAULT_COMMENT = ("<!-- issue-sorter -->\nIssue Sorter labelled this issue **{label}** ({score:.0%} sure). "
                   "If that is wrong, change the label: the bot learns from it.")
SUGGEST_COMMENT = "<!-- issue-sorter -->\nIssue Sorter's suggestions for this issue:\n\n{suggestions}"
KNOWN_KEYS = {"mode", "labels", "learn_labels", "allow", "threshold", "target_precision", "comment_template",
              "skip_authors"}


@dataclass(frozen=True)
class RepoConfig:
    mode: str = "label"  # label | comment (label + a comment) | suggest (comment only) | off
    labels: dict[str, str] = field(default_factory=dict)  # kind → this repository's label name
    learn_labels: tuple[str, ...] = ()  # the repository's own labels to learn with a model of its own
    allow: tuple[str, ...] = ()  # when set, only these labels are ever applied
    threshold: float | None = None  # overrides ISSUE_SORTER_THRESHOLD
    target_precision: float | None = None  # pick per-label thresholds that reach this precision
    comment_template: str | None = None  # {label}, {score}, {suggestions}
    skip_authors: tuple[str, ...] = ()  # e.g. dependabot[bot]
    source: str = "defaults"  # where it came from, for logs

    @property
    def wants_comments(self) -> bool:
        return self.mode in ("comment", "suggest")


def parse_config(text: str | None, source: str = CONFIG_PATH) -> tuple[RepoConfig, list[str]]:
    """(config, problems). Any problem means the defaults are used; comments mode is kept when asked."""
    if text is None:
        return RepoConfig(), []
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        return RepoConfig(source=source), [f"{source} is not valid YAML: {str(error).splitlines()[0]}"]
    if data is None:
        return RepoConfig(source=source), []
    if not isinstance(data, dict):
        return RepoConfig(source=source), [f"{source} must be a mapping of settings, not {type(data).__name__}"]
    problems = [f"unknown setting {key!r} (known: {', '.join(sorted(KNOWN_KEYS))})"
                for key in data if key not in KNOWN_KEYS]
    values = _validated(data, problems)
    if problems:
        mode = values.get("mode", "label")
        return RepoConfig(mode=mode if mode in MODES else "label", source=source), problems
    return RepoConfig(source=source, **values), []


def _validated(data: dict, problems: list[str]) -> dict:
    values: dict = {}
    if "mode" in data:
        values["mode"] = "off" if data["mode"] is False else data["mode"]  # YAML 1.1 reads bare off as false
        if values["mode"] not in MODES:
            problems.append(f"mode must be one of {', '.join(MODES)}, not {data['mode']!r}")
    if "labels" in data:
        labels = data["labels"]
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            problems.append("labels must map kinds (bug, feature, question, docs) to label names")
        else:
            problems.extend(f"labels: unknown kind {k!r} (kinds: {', '.join(KINDS)})" for k in labels if k not in KINDS)
            values["labels"] = dict(labels)
    for key in ("learn_labels", "allow", "skip_authors"):
        if key in data:
            items = data[key]
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                problems.append(f"{key} must be a list of names")
            else:
                values[key] = tuple(items)
    for key in ("threshold", "target_precision"):
        if key in data:
            number = data[key]
            if isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 <= number <= 1:
                problems.append(f"{key} must be a number between 0 and 1, not {number!r}")
            else:
                values[key] = float(number)
    if "comment_template" in data:
        template = data["comment_template"]
        if not isinstance(template, str) or not _formats(template):
            problems.append("comment_template must be text using only {label}, {score} and {suggestions}")
        else:
            values["comment_template"] = template
    return values


MAX_TEMPLATE_CHARS = 4000
WIDE_FIELD = re.compile(r"\{[^{}]*:[^{}]*\d{4,}[^{}]*\}")  # "{score:>999999999}" would build a huge string


def _formats(template: str) -> bool:
    if len(template) > MAX_TEMPLATE_CHARS or WIDE_FIELD.search(template):
        return False
    try:
        template.format(label="bug", score=0.9, suggestions="- bug")
        return True
    except (KeyError, IndexError, ValueError, AttributeError, TypeError):  # "{label.x}", "{score[0]}"
        return False


def load_config(github, repo: str) -> tuple[RepoConfig, list[str]]:
    """The repository's file, else the organisation's `.github` repository's, else defaults."""
    text = github.get_file_text(repo, CONFIG_PATH) if github else None
    source = f"{repo}/{CONFIG_PATH}"
    if text is None and github:
        org_repo = f"{repo.split('/')[0]}/.github"
        text = github.get_file_text(org_repo, CONFIG_PATH)
        source = f"{org_repo}/{CONFIG_PATH}"
    return parse_config(text, source)


def config_for(github, repo: str, *, number: int, redis: Redis) -> RepoConfig:
    """The repository's config for labelling issue `number`; a broken file is reported and never stops it."""
    try:
        config, problems = load_config(github, repo)
    except PermanentGitHubError as error:
        log.warning("%s: cannot read the config file (%s); using defaults", repo, error)
        return RepoConfig()
    if problems:
        _report_problems(github, repo, number, redis, config, problems)
    return config


def _report_problems(github, repo: str, number: int, redis: Redis, config: RepoConfig,
                     problems: list[str]) -> None:
    message = (f"Issue Sorter could not use {config.source}, so it runs with safe defaults:\n"
               + "\n".join(f"- {p}" for p in problems))
    log.warning("%s", message)
    digest = hashlib.sha256(message.encode()).hexdigest()[:16]
    if config.wants_comments and github and redis.set(WARNED_KEY.format(repo, digest), 1, nx=True, ex=86400):
        github.create_comment(repo, number, f"{WARNING_MARKER}\n{message}")
