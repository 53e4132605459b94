"""How the review pages write times and permissions: one time format (relative, the absolute time on hover)
and GitHub's own names for permissions ("Write", not "push")."""

from __future__ import annotations

import datetime as dt

from markupsafe import Markup, escape

from bot.github_api.issues import parse_github_time

# GitHub's API keys → the names its settings page shows
PERMISSION_NAMES = {"admin": "Admin", "maintain": "Maintain", "push": "Write", "triage": "Triage",
                    "pull": "Read"}
_UNITS = ((86400 * 365, "year"), (86400 * 30, "month"), (86400 * 7, "week"), (86400, "day"), (3600, "hour"),
          (60, "minute"))


def relative(moment: dt.datetime, now: dt.datetime) -> str:
    """"3 hours ago", "just now", "in 2 days" (a clock a little ahead)."""
    seconds = (now - moment).total_seconds()
    ahead, seconds = seconds < 0, abs(seconds)
    for size, unit in _UNITS:
        if seconds >= size:
            count = int(seconds // size)
            text = f"{count} {unit}{'' if count == 1 else 's'}"
            return f"in {text}" if ahead else f"{text} ago"
    return "just now"


def when(value, now: dt.datetime | None = None) -> Markup:
    """A <time>: relative, the absolute UTC time as its title (on hover) and machine-readable datetime."""
    if value in (None, ""):
        return Markup("")
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time(), dt.UTC)
    try:  # naive: UTC, as every timestamp we store is
        moment = parse_github_time(value).astimezone(dt.UTC)
    except ValueError:
        return escape(value)
    absolute = moment.strftime("%Y-%m-%d %H:%M UTC")
    text = relative(moment, now or dt.datetime.now(dt.UTC))
    return Markup('<time datetime="{}" title="{}">{}</time>').format(moment.isoformat(), absolute, text)


def permission(role: str) -> str:
    """GitHub's name for a permission key."""
    return PERMISSION_NAMES.get(role, role.capitalize())


def install(blueprint) -> None:
    """Make the filters available to the review templates."""
    blueprint.add_app_template_filter(when, "when")
    blueprint.add_app_template_filter(permission, "permission")
