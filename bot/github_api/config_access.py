"""Whether the App may read the config file on an installation's repositories.

The manifest asks for `single_file: read`, but its path cannot be set through the manifest flow: until a
maintainer sets it on the App's settings page (and each installation accepts it), GitHub refuses the file on
private repositories, and every repository with a config is held (bot.labeling.config). `issue-sorter run`
and `cron` say so at start, naming the installations and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bot.github_api.manifest import CONFIG_FILE

READABLE = ("read", "write")


def may_read_config(installation: Mapping) -> bool:
    """Whether the installation's permissions cover CONFIG_FILE: contents, or the single file at that path."""
    permissions = installation.get("permissions") or {}
    if permissions.get("contents") in READABLE:
        return True
    paths = set(installation.get("single_file_paths") or ()) | {installation.get("single_file_name")}
    return permissions.get("single_file") in READABLE and CONFIG_FILE in paths


def config_access_report(installations: Iterable[Mapping], settings_url: str) -> list[str]:
    """One line per installation that may not read CONFIG_FILE, with the fix; empty when all may."""
    lines = []
    for installation in installations:
        if may_read_config(installation):
            continue
        account = (installation.get("account") or {}).get("login", "?")
        lines.append(f"installation {installation.get('id')} ({account}) may not read {CONFIG_FILE}: its private "
                     f"repositories with a config are held. Set Single file to {CONFIG_FILE} at {settings_url}, "
                     f"then accept the new permission on the installation")
    return lines
