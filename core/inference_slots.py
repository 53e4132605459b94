"""Machine-wide inference slots: at most N model passes at once on this machine, across every worker process.

Why: on a 2-core machine, 4 labelling workers of 1 thread each time-slice the cores in their forward
passes; each pass then takes longer than alone and loses its cache at every switch, so 4 workers
labelled fewer issues a second than 2 (docs/BENCHMARKS.md, scale-out). With one slot per core's worth
of inference threads, a worker without a slot waits before its pass while the others' passes run at
full speed, and its GitHub, database and Redis calls still overlap theirs.

A slot is an exclusive `flock` on one of N files in a folder of the machine's temporary directory: the
kernel releases it when its holder exits, so a killed worker never keeps a slot. Workers in other
containers (another /tmp) do not share slots; the cores they share are theirs to size.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path


def default_slots(worker_threads: int, cores: int | None = None) -> int:
    """One slot per `worker_threads` cores this process may run on, at least one."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, worker_threads))


def default_folder() -> Path:
    """The slots' folder: per user, so that two users' services on one machine do not block each other."""
    return Path(tempfile.gettempdir()) / f"issue-sorter-inference-slots-{os.getuid()}"


class InferenceSlots:
    """`with slots.held():` around a model pass; `InferenceSlots(0)` never waits (slots off)."""

    def __init__(self, count: int, folder: Path | None = None):
        if count < 0:
            raise ValueError(f"inference slots must not be negative, not {count}")
        self.count, self.folder = count, folder or default_folder()
        if count:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _paths(self) -> list[Path]:
        return [self.folder / f"slot-{index}" for index in range(self.count)]

    @contextlib.contextmanager
    def held(self) -> Iterator[int | None]:
        """Hold a free slot for the block (its number; None when slots are off). Each call opens its own
        files, so that two threads of one process never share a lock."""
        if not self.count:
            yield None
            return
        paths = self._paths()
        start = random.randrange(self.count)  # spread the waiters over the slots
        order = paths[start:] + paths[:start]
        for index, path in enumerate(order):
            handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(handle)
                continue
            yield from _holding(handle, (start + index) % self.count)
            return
        # every slot busy: wait for one (the first of this call's order; waiters are spread by `start`)
        handle = os.open(order[0], os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except BaseException:
            os.close(handle)
            raise
        yield from _holding(handle, start)


def _holding(handle: int, number: int) -> Iterator[int]:
    try:
        yield number
    finally:
        os.close(handle)  # closing the last descriptor of the open file releases its lock
