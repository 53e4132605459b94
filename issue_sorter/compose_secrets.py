"""`issue-sorter compose-secrets [DIR]`: what `issue-sorter setup` wrote (`.env` and the App's key file) turned
into the secret files docker-compose.yml mounts, in one step (an empty file turns its feature off). Each is
readable by its owner only, and owned by the user of the container that reads it when this runs as root;
otherwise the command prints the one `chown` to run. Compose reads GITHUB_APP_ID and GITHUB_CLIENT_ID from the
same `.env`, which it never overwrites; tuning goes in issue-sorter.env (docs/CONFIG.md).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from issue_sorter.command import NO_SETTINGS, add
from issue_sorter.env_file import ENV_FILE, read_env
from issue_sorter.private_files import generated_secret, write_secret_file
from issue_sorter.redis_credentials import ACL_FILE, write_credentials

APP_UID, REDIS_UID = 10001, 999  # the image's user (Dockerfile), the redis image's
# file in DIR → the `.env` variable it holds (None: written by this command)
FROM_ENV = {"github-webhook-secret": "GITHUB_WEBHOOK_SECRET", "github-client-secret": "GITHUB_CLIENT_SECRET"}
KEY_FILE = "github-app-key.pem"
SESSION_FILE, METRICS_FILE = "session-secret", "metrics-token"


class ComposeSecretsError(RuntimeError):
    """What setup wrote is missing or incomplete; the message says what to run."""


def add_commands(commands) -> None:
    secrets = add(commands, "compose-secrets", cmd_compose_secrets,
                  "turn what `setup` wrote (.env, the App's key) into the secret files docker-compose.yml mounts",
                  settings=NO_SETTINGS, database=False)
    secrets.add_argument("directory", type=Path, nargs="?", default=Path("secrets"),
                         help="where compose reads them (default: ./secrets)")
    secrets.add_argument("--env-file", type=Path, default=ENV_FILE, help="setup's settings (default: .env)")


def cmd_compose_secrets(args: argparse.Namespace, _settings: None) -> int:
    try:
        written = write_compose_secrets(args.env_file, args.directory)
    except ComposeSecretsError as error:
        raise SystemExit(f"issue-sorter compose-secrets: {error}") from None
    print(f"wrote {', '.join(sorted(path.name for path in written))} in {args.directory} (mode 600)")
    if os.geteuid() == 0:
        owned = give_to_containers(args.directory, written)
        print(f"owned by the containers' users: {owned}")
    else:
        print(f"the containers read them as their own users; run once:\n  {chown_command(args.directory)}")
    return 0


def write_compose_secrets(env_file: Path, directory: Path) -> list[Path]:
    """Write every secret file compose mounts from `env_file` and the key it names; the files written."""
    values = read_env(env_file)
    missing = [name for name in ("GITHUB_APP_ID", "GITHUB_WEBHOOK_SECRET", "GITHUB_PRIVATE_KEY_PATH")
               if not values.get(name)]
    if missing:
        raise ComposeSecretsError(f"{env_file} lacks {', '.join(missing)}: run `issue-sorter setup` first")
    key = Path(values["GITHUB_PRIVATE_KEY_PATH"])
    if not key.is_file():
        raise ComposeSecretsError(f"the App's key {key} (GITHUB_PRIVATE_KEY_PATH in {env_file}) is not there")
    written = [directory / KEY_FILE]
    write_secret_file(written[0], key.read_text())
    for name, variable in FROM_ENV.items():
        write_secret_file(directory / name, values.get(variable, ""))  # empty: the review page is off
        written.append(directory / name)
    session = directory / SESSION_FILE
    if values.get("ISSUE_SORTER_SESSION_SECRET"):
        write_secret_file(session, values["ISSUE_SORTER_SESSION_SECRET"])
    else:
        generated_secret(session)
    metrics = directory / METRICS_FILE
    if not metrics.exists():
        write_secret_file(metrics, "")  # empty: /metrics is off until an operator puts a token in it
    written += [session, metrics]
    users = write_credentials(directory)
    written += [directory / ACL_FILE, *(directory / f"redis-{user}-password" for user in users)]
    return written


def chown_command(directory: Path) -> str:
    return (f"sudo chown {APP_UID} {directory}/* && sudo chown {REDIS_UID} {directory}/{ACL_FILE} && "
            f"chmod 400 {directory}/*")


def give_to_containers(directory: Path, written: list[Path]) -> str:
    """Each file to the user of the container that reads it (as root only), read-only."""
    for path in written:
        os.chown(path, REDIS_UID if path.name == ACL_FILE else APP_UID, -1)
        path.chmod(0o400)
    return f"{APP_UID} (the App), {REDIS_UID} ({ACL_FILE})"
