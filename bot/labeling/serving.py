"""The models a worker serves: loaded once per process, switched when the registry promotes another."""

from __future__ import annotations

import gc
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from core.classifier import Classifier, load_classifier

log = logging.getLogger(__name__)
WARM_UP_TEXT = "Warm-up: the first prediction of a process pays for what torch prepares lazily. " * 40
NO_MODEL = "no model is promoted: run `issue-sorter bootstrap-model` (or `issue-sorter train FILE --promote`)"


class Served(NamedTuple):
    """The promoted version that serves a repository, and the scope it was promoted for."""

    scope: str
    version: str
    path: str


class ServingModels:
    """Per-process cache of the serving model of each scope; reloads only when the registry switches.

    It holds at most `max_loaded` models (core.quotas.Quotas.loaded_models): loading another sends the least
    recently served away, so an installation with many repositories of their own cannot fill a worker's memory.

    `resolve(repo[, session])` names the version serving that repository (core.store.serving_model_for, in the
    job's transaction when it passes one); it is a cheap query, so every job asks it and a `promote` or
    `rollback` reaches running workers without a restart. `on_serve(repo, version)` is called the first time
    this process serves a repository with a version (bot.worker queues the memory's fill there);
    `on_load(served, classifier)` each time a model is read from disk (bot.worker records its engine).
    """

    def __init__(self, resolve: Callable[[str | None], Served | None],
                 loader: Callable[[str], Classifier] = load_classifier, *,
                 on_serve: Callable[[str, str], None] | None = None,
                 on_load: Callable[[Served, Classifier], None] | None = None, max_loaded: int = 3):
        if max_loaded < 1:
            raise ValueError(f"max_loaded must be at least 1, got {max_loaded}")
        self._resolve, self._loader, self._on_serve, self._on_load = resolve, loader, on_serve, on_load
        self._max_loaded = max_loaded
        self._announced: set[tuple[str, str]] = set()  # (repo, version) pairs on_serve was called for
        self._loaded: OrderedDict[str, Classifier] = OrderedDict()  # least recently served first
        self._lock = threading.Lock()
        self.loads = 0  # how many times a model was read from disk in this process

    def warm_up(self) -> None:
        """One prediction with each loaded model, on a text long enough to reach its token limit; then
        everything loaded so far is left out of the garbage collector's full passes (`keep_out_of_gc`)."""
        with self._lock:
            loaded = list(self._loaded.values())
        for classifier in loaded:
            classifier.predict([WARM_UP_TEXT])
        keep_out_of_gc()

    def for_repository(self, repo: str | None, session=None) -> Classifier | None:
        """The classifier serving `repo` (None: the global one), or None when nothing is promoted; asked in
        `session` when one is given."""
        served = self._resolve(repo) if session is None else self._resolve(repo, session)
        if served is None:
            return None
        if repo is not None and self._on_serve is not None and (repo, served.version) not in self._announced:
            self._announced.add((repo, served.version))
            self._on_serve(repo, served.version)
        with self._lock:
            current = self._loaded.get(served.scope)
            if current is None or current.version != served.version:
                self._loaded.pop(served.scope, None)  # the old version goes before the new one is read
                self._make_room()
                log.info("loading model %s for scope %s from %s", served.version, served.scope, served.path)
                self._loaded[served.scope] = current = self._loader(served.path)
                keep_out_of_gc()
                self.loads += 1
                if self._on_load is not None:
                    self._on_load(served, current)
            self._loaded.move_to_end(served.scope)
            return current

    @property
    def loaded_scopes(self) -> list[str]:
        """The scopes whose models this process holds, least recently served first."""
        with self._lock:
            return list(self._loaded)

    def _make_room(self) -> None:
        while len(self._loaded) >= self._max_loaded:
            scope, _ = self._loaded.popitem(last=False)
            log.info("model of scope %s unloaded: this worker keeps %d models at most "
                     "(ISSUE_SORTER_MAX_LOADED_MODELS), and it was the least recently used",
                     scope, self._max_loaded)


def keep_out_of_gc() -> None:
    """Move every object alive now (the libraries, the models, their tokenizers: hundreds of thousands) out
    of reach of the cyclic garbage collector. Its full passes walk every tracked object, so the job during
    which one comes (once enough of the jobs' own objects have outlived the younger generations) would wait
    for the whole walk; frozen, a full pass walks only what was made since. They still go by reference
    counting; a model switched out is put back within reach first, so that the one full pass here (at a
    load only) collects its cycles."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
