"""How a subcommand declares itself: its handler, and what the boundary in `issue_sorter.cli` prepares.

Every handler is `handler(args, settings) -> exit code`. The boundary loads the settings first (with
the webhook secret required for `WEBHOOK`, none at all for `NO_SETTINGS`) and, with `database=True`,
checks that the database is migrated before the handler does any work.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator

from core.db import make_sessionmaker
from core.settings import Settings
from trainer.registry import Registry

OPERATOR = "operator"  # settings without the webhook secret: commands that receive no webhooks
WEBHOOK = "webhook"  # settings with the webhook secret required
NO_SETTINGS = None  # the handler reads the environment itself (`run` fills in embedded defaults first)

Handler = Callable[[argparse.Namespace, object], int | None]


def add(subparsers, name: str, handler: Handler, help_text: str, *, settings: str | None = OPERATOR,
        database: bool = True) -> argparse.ArgumentParser:
    """A subcommand of `issue-sorter`; returns its parser for the command's own arguments."""
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(handler=handler, settings=settings, database=database)
    return parser


@contextlib.contextmanager
def open_registry(settings: Settings) -> Iterator[Registry]:
    """The model registry of `settings`, in a transaction of its own committed when the command's work is done
    (its session is `registry.session`): every command that reads or writes models opens it so."""
    with Registry.open(settings.model_dir, make_sessionmaker(settings.database_url)) as registry:
        yield registry
