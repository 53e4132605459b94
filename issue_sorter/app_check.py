"""What `issue-sorter run` and `cron` say at start about the App on GitHub: whether every installation may read
the config file (bot.github_api.config_access). A repository whose file GitHub refuses is held, so this is
said before the first issue rather than found on the review page after it."""

from __future__ import annotations

from collections.abc import Callable

from bot.github_api.client import GitHubApp, GitHubError
from bot.github_api.config_access import config_access_report
from bot.github_api.manifest import CONFIG_FILE
from core.settings import Settings


def check_config_access(settings: Settings, say: Callable[[str], None] = print,
                        app: Callable[[Settings], GitHubApp] = GitHubApp.from_settings) -> list[str]:
    """Ask GitHub for the App and its installations and say what cannot read CONFIG_FILE, with the fix; the
    lines that warn (none in dry-run, or when GitHub cannot be asked: then one line says so)."""
    if settings.dry_run:
        return []
    try:
        github = app(settings)
        about, installations = github.app(), github.installations()
    except (GitHubError, ValueError) as error:
        say(f"could not ask GitHub whether the App may read {CONFIG_FILE} ({error}); `issue-sorter check-config "
            f"owner/name` asks for one repository")
        return []
    slug, owner = about.get("slug", settings.app_slug), about.get("owner") or {}
    organisation = f"/organizations/{owner.get('login')}" if owner.get("type") == "Organization" else ""
    warnings = config_access_report(installations,
                                    f"{settings.web_url}{organisation}/settings/apps/{slug}/permissions")
    for line in warnings:
        say(f"WARNING: {line}")
    if not installations:
        say(f"the App is not installed anywhere yet: {about.get('html_url', settings.web_url)}/installations/new")
    elif not warnings:
        say(f"every installation of the App ({len(installations)}) may read {CONFIG_FILE}")
    return warnings
