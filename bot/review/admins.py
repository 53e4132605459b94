"""Who is an operator (ISSUE_SORTER_ADMINS): GitHub user ids, never logins alone.

GitHub frees a login when its owner renames, and anyone may take it then. The setting may name an admin by
login for convenience: that login is bound, once, to the id of the first account that signs in with it,
and from then on only that id is an admin. An id in the setting is taken as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from redis import Redis

log = logging.getLogger(__name__)

BOUND_KEY = "issue-sorter:review:admin-ids"  # hash: login (lowercase) → the GitHub user id it was bound to


def bind_login(redis: Redis, admins: Iterable[str], login: str, user_id: int) -> None:
    """At sign-in: when `login` is an admin named by login and not bound yet, bind it to this account."""
    named = {entry.lower() for entry in admins if not entry.isdigit()}
    if login.lower() in named and redis.hsetnx(BOUND_KEY, login.lower(), user_id):
        log.info("ISSUE_SORTER_ADMINS: login %s bound to GitHub user id %d (write the id in the setting to "
                 "make this independent of Redis)", login, user_id)


def is_admin(redis: Redis, admins: Iterable[str], user_id: int | None) -> bool:
    """True when this GitHub user id is in the setting, or is what one of its logins was bound to."""
    if user_id is None:  # a session from before ids were kept: signing in again gives it one
        return False
    entries = list(admins)
    if str(user_id) in entries:
        return True
    logins = [entry.lower() for entry in entries if not entry.isdigit()]
    bound = redis.hmget(BOUND_KEY, logins) if logins else []
    return str(user_id).encode() in bound
