"""`issue-sorter`: the one command for users and operators, one tree of subcommands, one error boundary.

The service's processes (run, web, worker, training-worker, cron, migrate) are in
`issue_sorter.service_commands`, the model registry's in `issue_sorter.model_commands`, the learning
loop's in `issue_sorter.operations`. `run_command` is the boundary: errors we can explain become one
line on stderr and exit code 1; a configuration problem stops before anything starts.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from core.inference_slots import SlotsError
from core.migrate import DatabaseNotReady, require_tables
from core.settings import ConfigError, Settings, unknown_variables
from issue_sorter import (
    backtest_command,
    compose_secrets,
    config_commands,
    model_commands,
    operations,
    precision_command,
    predict,
    service_commands,
)
from issue_sorter.command import WEBHOOK
from issue_sorter.env_file import fill_from_env_file
from trainer.registry import RegistryError

LoadSettings = Callable[..., Settings]


def load_settings(*, require_webhook_secret: bool = False) -> Settings:
    """Settings from this process's environment, with what `.env` (`issue-sorter setup`'s) sets where it is
    unset: every command reads the file, as `run` does (also for what it starts, such as `bootstrap-model`)."""
    fill_from_env_file(os.environ)
    return Settings.from_env(os.environ, require_webhook_secret=require_webhook_secret)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="issue-sorter", description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (service_commands, model_commands, precision_command, operations, config_commands, predict,
                   backtest_command, compose_secrets):
        module.add_commands(commands)
    return parser


def run_command(args: argparse.Namespace, load: LoadSettings = load_settings) -> int:
    """Prepare what the command declared (settings, a migrated database), run it, explain its errors."""
    try:
        settings = None if args.settings is None else load(require_webhook_secret=args.settings == WEBHOOK)
        if settings is not None:  # each ISSUE_SORTER_* variable nothing reads: a misspelt one keeps its default
            for line in unknown_variables(os.environ).values():
                print(f"issue-sorter: warning: {line}", file=sys.stderr)
        if args.database:
            require_tables(settings.database_url)
        return args.handler(args, settings) or 0
    except ConfigError as error:
        raise SystemExit(f"issue-sorter: {error}") from None
    except (DatabaseNotReady, RegistryError, SlotsError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None, *, load: LoadSettings = load_settings) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one INFO line per HTTP request drowns what matters
    return run_command(build_parser().parse_args(argv), load)


if __name__ == "__main__":
    sys.exit(main())
