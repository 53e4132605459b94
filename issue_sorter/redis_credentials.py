"""Redis users and passwords: one user per service, an ACL file that holds only the passwords' SHA-256.

`issue-sorter redis-credentials DIR` writes what docker-compose.yml mounts: DIR/redis-<user>-password per
service and DIR/redis-users.acl for the server. Unauthenticated clients may only PING (health checks).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path

from issue_sorter.private_files import generated_secret, write_secret_file

SERVICE_USERS = ("web", "worker", "trainer", "cron")  # docker-compose.yml's services that use Redis
# Everything RQ does (it lists clients to clean up dead workers), none of the server's administration.
SERVICE_RULES = "~* &* +@all -@admin -flushall -flushdb -swapdb +client|list"
HEALTH_CHECK_RULE = "user default on nopass -@all +ping"
ACL_FILE = "redis-users.acl"
PASSWORD_FILE = "redis-{}-password"


def acl_text(passwords: Mapping[str, str]) -> str:
    """The ACL file: `default` may only PING; each user has its password, stored as SHA-256."""
    lines = [HEALTH_CHECK_RULE]
    for user, password in passwords.items():
        lines.append(f"user {user} on #{hashlib.sha256(password.encode()).hexdigest()} {SERVICE_RULES}")
    return "\n".join(lines) + "\n"


def write_credentials(directory: Path, users: Iterable[str] = SERVICE_USERS) -> dict[str, str]:
    """Generate (once) each user's password file and write the ACL file, all 0600; returns the passwords."""
    passwords = {user: generated_secret(directory / PASSWORD_FILE.format(user)) for user in users}
    write_secret_file(directory / ACL_FILE, acl_text(passwords))
    return passwords
