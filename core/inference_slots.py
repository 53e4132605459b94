"""Machine-wide inference slots: at most N model passes at once on this machine, across every worker process.

Why: on a 2-core machine, 4 labelling workers of 1 thread each time-slice the cores in their forward
passes; each pass then takes longer than alone and loses its cache at every switch, so 4 workers
labelled fewer issues a second than 2 (docs/BENCHMARKS.md, scale-out). With one slot per core's worth
of inference threads, a worker without a slot waits before its pass while the others' passes run at
full speed, and its GitHub, database and Redis calls still overlap theirs.

A slot is an exclusive `flock` on one of N files in the App's own folder, var/inference-slots beside the
App's other state (the working directory's var/, as `issue-sorter run` and the image keep it): the kernel
releases it when its holder exits, so a killed worker never keeps a slot. That folder is made 0700 and
checked before use: one another user owns, or could write or swap (the folder or var/ group- or
world-writable, or a symbolic link), is refused with an error that says so, since whoever can write its
files can hold every slot. A pass waits for a slot at most `wait_seconds`, then fails with an error that
says so (RQ retries the job). Workers in other containers (another var/) do not share slots; the cores they
share are theirs to size.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import stat
import time
from collections.abc import Iterator
from pathlib import Path

POLL_SECONDS = 0.02  # how often a waiting pass tries the slots again


class SlotsError(RuntimeError):
    """The slots' folder cannot be trusted, or no slot came free in time; the message says which and why."""


def default_slots(worker_threads: int, cores: int | None = None) -> int:
    """One slot per `worker_threads` cores this process may run on, at least one."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, worker_threads))


def _private_folder(folder: Path) -> None:
    """`folder` (and var/ above it) made 0700 if new, and refused unless this user alone can change it."""
    for path in (folder.parent, folder):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise SlotsError(f"inference slots: {path} is not a folder (a symbolic link?): remove it")
        if info.st_uid != os.getuid():
            raise SlotsError(f"inference slots: {path} belongs to user id {info.st_uid}, not to this user "
                             f"({os.getuid()}): remove it, or run the App as its owner")
        if info.st_mode & 0o022 or (path == folder and info.st_mode & 0o077):
            raise SlotsError(f"inference slots: {path} is open to other users (mode "
                             f"{stat.S_IMODE(info.st_mode):o}): `chmod 700 {path}`")


class InferenceSlots:
    """`with slots.held():` around a model pass; `InferenceSlots(0)` never waits (slots off)."""

    def __init__(self, count: int, folder: Path | None = None, *, wait_seconds: float = 30.0):
        if count < 0:
            raise ValueError(f"inference slots must not be negative, not {count}")
        # by default under the App's own var/ (the working directory's), never a guessable /tmp path
        self.folder = folder or Path("var").resolve() / "inference-slots"
        self.count, self.wait_seconds = count, wait_seconds
        if count:
            _private_folder(self.folder)

    @contextlib.contextmanager
    def held(self) -> Iterator[int | None]:
        """Hold a free slot for the block (its number; None when slots are off). Each call opens its own
        files, so that two threads of one process never share a lock."""
        if not self.count:
            yield None
            return
        paths = [self.folder / f"slot-{index}" for index in range(self.count)]
        start = random.randrange(self.count)  # spread the waiters over the slots
        order = paths[start:] + paths[:start]
        deadline = time.monotonic() + self.wait_seconds
        while True:
            for index, path in enumerate(order):
                handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(handle)
                    continue
                try:
                    yield (start + index) % self.count
                finally:
                    os.close(handle)  # closing the last descriptor of the open file releases its lock
                return
            if time.monotonic() >= deadline:
                raise SlotsError(f"no inference slot came free in {self.wait_seconds:g} s (all {self.count} in "
                                 f"{self.folder} held): the machine's cores are saturated; the job is retried")
            time.sleep(POLL_SECONDS)

