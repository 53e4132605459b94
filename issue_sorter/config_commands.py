"""`issue-sorter check-config FILE | owner/name`: a repository's `.github/issue-sorter.yml` read and parsed
exactly as the labelling job does (bot.labeling.config), so a maintainer sees before the first issue whether
the repository would be held, which settings would be ignored, and what is in force."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import re
from pathlib import Path

from bot.github_api.client import NotAFile, RepoFile
from bot.labeling.config import CHECKS, RepoConfig, load_config, parse_file, unreadable
from core.settings import Settings
from issue_sorter.command import add

REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+")


def add_commands(commands) -> None:
    check = add(commands, "check-config", cmd_check_config,
                "check a .github/issue-sorter.yml (a file here, or a repository's on GitHub) as the App reads it",
                database=False)
    check.add_argument("target", metavar="FILE|owner/name",
                       help="a file to check, or a repository whose file (else its organisation's) the App reads")


def cmd_check_config(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when the config is read without a problem, 1 when a setting is ignored or the repository held."""
    path = Path(args.target)
    if path.exists() or not REPOSITORY.fullmatch(args.target):
        config, problems = check_file(path)
    else:
        config, problems = check_repository(args.target, settings)
    print(describe(config, problems))
    return 1 if problems else 0


def check_file(path: Path) -> tuple[RepoConfig, tuple[str, ...]]:
    """A local file as the App would parse it from GitHub (its size, its encoding, its YAML, its settings)."""
    source = str(path)
    if path.is_dir():
        return unreadable(source, NotAFile(source, "folder"))
    if not path.is_file():
        raise SystemExit(f"check-config: no file {source} (and not a repository's owner/name)")
    data = path.read_bytes()
    file = RepoFile(hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(), len(data), data)
    return parse_file(file, source)


def check_repository(repo: str, settings: Settings) -> tuple[RepoConfig, tuple[str, ...]]:
    """The repository's config as the App reads it now: its file, else its organisation's, else the defaults."""
    from bot.github_api.client import GitHubApp, TransientGitHubError

    if settings.dry_run:
        raise SystemExit("check-config owner/name reads GitHub as the App: set GITHUB_APP_ID and GITHUB_PRIVATE_KEY "
                         "(or check a file: issue-sorter check-config .github/issue-sorter.yml)")
    app = GitHubApp.from_settings(settings)
    try:
        installation_id = app.repository_installation(repo)
        if installation_id is None:
            raise SystemExit(f"check-config: the App is not installed on {repo}; install it there first")
        return load_config(app.writer_for(installation_id).get_file, repo)
    except TransientGitHubError as error:  # a permanent one holds the repository: load_config says so
        raise SystemExit(f"check-config: GitHub did not answer for {repo}: {error}") from None


def describe(config: RepoConfig, problems: tuple[str, ...] | list[str]) -> str:
    """What the App makes of the config: held or not, each problem, and every setting in force."""
    if config.held:
        head = f"HELD: {config.held}"
    elif problems:
        head = f"{config.source}: these settings are ignored, their defaults apply:"
    else:
        head = f"{config.source}: no problem"
    lines = [head, *(f"  - {problem}" for problem in problems[1 if config.held and len(problems) == 1 else 0:])]
    values = dataclasses.asdict(config)
    lines.append("in force:" if not config.held else "the settings read (nothing is applied while it is held):")
    lines.extend(f"  {key}: {_shown(key, values[key])}" for key in CHECKS)
    lines.append(f"  own labels: {_own_labels(config)}")
    return "\n".join(lines)


def _own_labels(config: RepoConfig) -> str:
    """Whether the App writes the repository's own labels: only where the file sets `areas`."""
    if config.areas == ():
        return "off"
    if config.write_own_labels:
        return "written beside the kind where their threshold keeps the precision target"
    return "only suggested on the review page (set `areas:` to have them written)"


def _shown(key: str, value: object) -> str:
    if key == "areas" and value is None:
        return "every candidate label"
    if key == "target_precision" and value is None:
        return "off"
    if key == "abstain_label" and value is None:
        return "the App's (ISSUE_SORTER_ABSTAIN_LABEL)"
    if key == "labels" and not value:
        return "{} (each kind's label found by name)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]" if value else "[] (none)"
    return "none" if value is None else str(value)
