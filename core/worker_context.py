"""The one slot per worker process for the context it builds at start and every job reads.

RQ jobs are plain functions, so their services (settings, sessions, models, clients) come from the
process that runs them: the worker installs its context here once; tests install one built from fakes.
"""

from __future__ import annotations

from typing import Generic, TypeVar

Context = TypeVar("Context")


class ContextSlot(Generic[Context]):
    """Holds one process's context; `current()` names the command that installs it when it is empty."""

    def __init__(self, kind: str, started_by: str):
        self._kind, self._started_by = kind, started_by
        self._context: Context | None = None

    def configure(self, context: Context | None) -> None:
        """Install the context jobs read (None removes it); called once by the worker at start."""
        self._context = context

    def current(self) -> Context:
        if self._context is None:
            raise RuntimeError(f"no {self._kind}: start jobs through `{self._started_by}`")
        return self._context
