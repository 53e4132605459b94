"""The lesson's data set from the Hugging Face hub, one file at a time: a progress line before each, a
bound on the time each may take, a file that cannot be read fetched again once, and one line naming the
repository, the file and the fix for every failure (`HubDataError`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from trainer.dataset import HUB_DATASET, HUB_PATH, Example, load_hub

log = logging.getLogger(__name__)

FILE_SECONDS = 300.0  # the most one file may take, retries included (huggingface_hub alone retries ~400 s)
OFFLINE_FIX = "pass --data FILE (a labelled file) to train without the hub"


class HubDataError(FileNotFoundError):
    """The hub's data set could not be read; the message names the file and what to do."""


def load_hub_data(repos: Sequence[str], *, revision: str | None = None, revisions: set[str] | None = None,
                  say: Callable[[str], None] = log.info, seconds: float = FILE_SECONDS, first: int = 1,
                  total: int | None = None, offline: bool = False) -> list[Example]:
    """Every issue of `repos`' files in HUB_DATASET (at `revision`, else main), saying `hub: owner/name (i of n)`
    before each; the commits read are added to `revisions`. `first`/`total` number the files when one run
    reads several lists; `offline` (the hub cannot be reached): from the cache only, without retrying."""
    import pyarrow

    total = total or len(repos)
    examples: list[Example] = []
    for number, repo in enumerate(repos, start=first):
        say(f"hub: {repo} ({number} of {total})")
        filename = HUB_PATH.format(repo=repo)
        for force in (False, True) if not offline else (False,):
            path = download_file(filename, revision, seconds=seconds, force=force, offline=offline)
            try:
                examples += load_hub([repo], download=lambda *args, path=path, **kwargs: str(path),
                                     revision=revision, revisions=revisions)
                break
            except (pyarrow.ArrowException, OSError, EOFError) as error:  # cut or scrambled: fetch once more, then stop
                if force or offline:
                    again = "even fetched again" if force else "and the hub cannot be reached to fetch it again"
                    raise HubDataError(f"hub: {filename} of {HUB_DATASET} cannot be read {again} "
                                       f"({type(error).__name__}: {_first_line(error)}); delete {path} and retry, "
                                       f"or {OFFLINE_FIX}") from None
                log.warning("hub: %s of %s cannot be read (%s); fetching it again", filename, HUB_DATASET, error)
    return examples


def download_file(filename: str, revision: str | None, *, seconds: float = FILE_SECONDS, force: bool = False,
                  offline: bool = False) -> Path:
    """One file of the data set in the hub cache, within `seconds`, or a HubDataError saying why not;
    `offline`: the cached copy, at once (huggingface_hub would retry a closed port for ~25 s)."""
    from huggingface_hub import hf_hub_download

    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["path"] = hf_hub_download(HUB_DATASET, filename, repo_type="dataset", revision=revision,
                                              force_download=force, local_files_only=offline)
        except Exception as error:  # noqa: BLE001 - handed to the caller's thread, explained there
            outcome["error"] = error

    # a daemon thread: a hub that never answers cannot hold the process past the bound
    worker = threading.Thread(target=run, name=f"hub-download {filename}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise HubDataError(f"hub: no answer from {hub_endpoint()} for {filename} of {HUB_DATASET} in {seconds:.0f} s; "
                           f"retry later, or {OFFLINE_FIX}")
    if "error" in outcome:
        raise HubDataError(explain(outcome["error"], filename, revision)) from None
    return Path(outcome["path"])


def explain(error: Exception, filename: str, revision: str | None) -> str:
    """One line for a failed download of `filename`: what happened and what to do."""
    from huggingface_hub import constants, errors

    at = f"revision {revision}" if revision else "main"
    if isinstance(error, errors.RepositoryNotFoundError):
        return f"hub: {hub_endpoint()} has no data set {HUB_DATASET}; {OFFLINE_FIX}"
    if isinstance(error, errors.RevisionNotFoundError):
        return (f"hub: {HUB_DATASET} has no revision {revision}; pass --revision with a branch, tag or commit "
                f"of it, or leave it out for main")
    if isinstance(error, errors.EntryNotFoundError) and not isinstance(error, errors.LocalEntryNotFoundError):
        return (f"hub: {HUB_DATASET} at {at} has no {filename}; pass --revision with a commit that has it, "
                f"or {OFFLINE_FIX}")
    if isinstance(error, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled):
        return (f"hub: {hub_endpoint()} cannot be reached and {filename} of {HUB_DATASET} is not in the cache "
                f"({constants.HF_HUB_CACHE}); connect and retry, or {OFFLINE_FIX}")
    if isinstance(error, errors.HfHubHTTPError) and error.response is not None:
        return (f"hub: {hub_endpoint()} answered {error.response.status_code} for {filename} of {HUB_DATASET}; "
                f"retry later, or {OFFLINE_FIX}")
    return f"hub: {filename} of {HUB_DATASET} failed ({type(error).__name__}: {_first_line(error)}); {OFFLINE_FIX}"


def is_cached(repos: Sequence[str], *, revision: str | None = None) -> bool:
    """Every file of `repos` is in the hub cache (at `revision`, else where main last pointed)."""
    from huggingface_hub import try_to_load_from_cache

    return all(isinstance(try_to_load_from_cache(HUB_DATASET, HUB_PATH.format(repo=repo), revision=revision,
                                                 repo_type="dataset"), str) for repo in repos)


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [""])[0][:200]


def hub_endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT
