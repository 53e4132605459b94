"""Labelled issues from files, the App's database or the hub dataset, all as the same `Example`s.

Rows that cannot be used (an empty label, no single kind) are reported, never dropped silently: every
loader logs a warning with the count and, given a `skipped` list, appends one `Skipped` per row.
"""

from __future__ import annotations

import ast
import csv
import datetime as dt
import hashlib
import itertools
import json
import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import hf_hub_download
from sqlalchemy import ColumnElement, and_, false, or_, select
from sqlalchemy.orm import Session

from core.issue_text import format_issue_text
from core.kinds import kind_of
from core.tables import GLOBAL_SCOPE, Installation, IssueRecord, Repository

log = logging.getLogger(__name__)

HUB_DATASET = "open-index/open-github-issues"  # the lesson's dataset: issues of 17 projects with labels
HUB_PATH = "data/issues/{repo}/0.parquet"
# The lesson's split of the hub dataset's projects: TEST_REPOS are never trained on.
TRAIN_REPOS = ["python/cpython", "rust-lang/rust", "microsoft/TypeScript",
               "kubernetes/kubernetes", "pingcap/tidb", "swiftlang/swift",
               "ClickHouse/ClickHouse", "golang/go"]
TEST_REPOS = ["moby/moby", "etcd-io/etcd", "facebook/react", "redis/redis", "vuejs/core"]
FILE_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


@dataclass(frozen=True)
class Example:
    """One labelled issue."""

    title: str
    body: str
    label: str
    repo: str | None = None  # owner/name
    created_at: dt.datetime | None = None  # UTC

    @property
    def text(self) -> str:
        """The exact text the model reads, in training and in serving."""
        return format_issue_text(self.title, self.body)


@dataclass(frozen=True)
class Skipped:
    """A row a loader could not use, and why."""

    source: str  # file path, "database" or the hub repository
    row: int  # 1-based data row (CSV: not counting the header)
    reason: str


def load_file(path: Path | str, *, skipped: list[Skipped] | None = None) -> list[Example]:
    """Examples from CSV, JSON Lines or Parquet with columns title, body, label[, repo, created_at]."""
    path = Path(path)
    kind = FILE_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: unknown file type {path.suffix!r}; use one of {', '.join(FILE_FORMATS)}")
    rows = {"csv": _read_csv, "jsonl": _read_jsonl, "parquet": _read_parquet}[kind](path)
    return _to_examples(rows, str(path), skipped)


def _read_csv(path: Path) -> Iterator[dict]:
    # Issue bodies can be far longer than csv's 128 KiB default field limit (NLBSE has a 208k one).
    csv.field_size_limit(sys.maxsize)
    with path.open(newline="", encoding="utf-8") as handle:
        yield from csv.DictReader(handle)


def _read_jsonl(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _read_parquet(path: Path) -> Iterator[dict]:
    import pyarrow.parquet as pq

    yield from pq.read_table(path).to_pylist()


def _to_examples(rows: Iterable[dict], source: str, skipped: list[Skipped] | None) -> list[Example]:
    examples, problems = [], []
    for number, row in enumerate(rows, start=1):
        missing = {"title", "label"} - row.keys()
        if missing:
            raise ValueError(f"{source}: no {', '.join(sorted(missing))} column; "
                             "expected columns title, body, label[, repo, created_at]")
        label = (row.get("label") or "").strip()
        if not label:
            problems.append(Skipped(source, number, "empty label"))
            continue
        examples.append(Example(title=row.get("title") or "", body=row.get("body") or "", label=label,
                                repo=row.get("repo") or None, created_at=parse_time(row.get("created_at"))))
    _report(problems, source, skipped)
    return examples


def _report(problems: list[Skipped], source: str, skipped: list[Skipped] | None) -> None:
    if problems:
        reasons = sorted({p.reason for p in problems})
        log.warning("%s: skipped %d rows (%s)", source, len(problems), "; ".join(reasons))
    if skipped is not None:
        skipped.extend(problems)


def parse_time(value: object) -> dt.datetime | None:
    """A UTC datetime from a datetime, an ISO string or 'YYYY-MM-DD HH:MM:SS'; naive values are UTC."""
    if value is None or value == "":
        return None
    moment = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class Audience:
    """Whose confirmed issues a model may learn from: nobody's data goes where it does not belong.

    A repository's model: its own installation's repositories (the operator's own, without an
    installation, for an operator's repository), and other installations' public ones only when the
    operator shares them. The global model: public repositories and the operator's own, and the
    private ones of installations that opted in. Suspended or removed installations teach nothing.
    """

    global_model: bool = False
    installation_id: int | None = None  # the repository's installation (a repository's model)
    share_public: bool = False  # ISSUE_SORTER_SHARE_PUBLIC_DATA
    opted_in: frozenset[int] = field(default_factory=frozenset)  # ISSUE_SORTER_GLOBAL_INSTALLATIONS

    def readable(self) -> ColumnElement[bool]:
        """The repositories this audience may read, as a WHERE clause over Repository."""
        own = (Repository.installation_id.is_(None) if self.installation_id is None
               else Repository.installation_id == self.installation_id)
        public = Repository.private.is_(False) if self.share_public or self.global_model else false()
        if self.global_model:
            own = or_(Repository.installation_id.is_(None), Repository.installation_id.in_(sorted(self.opted_in)))
        frozen = select(Installation.id).where(or_(Installation.suspended_at.is_not(None),
                                                   Installation.removed_at.is_not(None)))
        return and_(or_(own, public),
                    or_(Repository.installation_id.is_(None), Repository.installation_id.not_in(frozen)))


def load_database(session: Session, scope: str | None = None, *, exclude: str | None = None,
                  newest: int | None = None, audience: Audience | None = None,
                  skipped: list[Skipped] | None = None) -> list[Example]:
    """Issues whose label a human confirmed, oldest first.

    `scope` is a repository full name (None or "global": all); `exclude` leaves one repository out;
    `newest` keeps only the most recently recorded that many, so the query stays bounded; `audience`
    keeps only the repositories that model may learn from (None: every one, for the operator's commands).
    """
    query = (select(IssueRecord, Repository.full_name).join(Repository)
             .where(IssueRecord.confirmed_label.is_not(None)))
    if audience is not None:
        query = query.where(audience.readable())
    if scope and scope != GLOBAL_SCOPE:
        query = query.where(Repository.full_name == scope)
    if exclude:
        query = query.where(Repository.full_name != exclude)
    if newest is not None:
        query = query.order_by(IssueRecord.id.desc()).limit(newest)
    rows = sorted(session.execute(query), key=lambda row: row[0].id)
    examples, problems = [], []
    for issue, repo in rows:
        if not issue.confirmed_label.strip():
            problems.append(Skipped("database", issue.id, "empty confirmed label"))
            continue
        examples.append(Example(title=issue.title or "", body=issue.body or "", label=issue.confirmed_label,
                                repo=repo, created_at=parse_time(issue.opened_at)))
    _report(problems, "database", skipped)
    return examples


def load_hub(repo_names: Sequence[str], *, dataset: str = HUB_DATASET,
             download: Callable[..., str] = hf_hub_download, limit: int | None = None,
             skipped: list[Skipped] | None = None, revision: str | None = None,
             revisions: set[str] | None = None) -> list[Example]:
    """The lesson's loader: issues (not pull requests) of each project, labelled by `kind_of`.

    `revision` pins the dataset's commit; the commits the files came from are added to `revisions`, for
    the model card, so a later run can ask for exactly the same data.
    """
    examples = []
    pinned = {"revision": revision} if revision else {}
    for repo in repo_names:
        path = download(dataset, HUB_PATH.format(repo=repo), repo_type="dataset", **pinned)
        commit = snapshot_revision(Path(path)) or revision
        if revisions is not None and commit:
            revisions.add(commit)
        examples += _hub_examples(Path(path), repo, limit, skipped)
    return examples


def snapshot_revision(path: Path) -> str | None:
    """The commit of a file in the hub cache (`.../snapshots/<40 hex>/...`), or None elsewhere."""
    for before, part in itertools.pairwise(path.parts):
        if before == "snapshots" and len(part) == 40 and all(c in "0123456789abcdef" for c in part):
            return part
    return None


def _hub_examples(path: Path, repo: str, limit: int | None, skipped: list[Skipped] | None) -> list[Example]:
    examples, problems = [], []
    rows = (row for row in _read_parquet(path) if str(row.get("is_pull_request")) == "False")
    for number, row in enumerate(rows, start=1):
        if limit is not None and number > limit:
            break
        kind = kind_of(parse_labels(row.get("labels")))
        if kind is None:
            problems.append(Skipped(repo, number, "labels give no single kind"))
            continue
        examples.append(Example(title=row.get("title") or "", body=row.get("body") or "", label=kind,
                                repo=repo, created_at=parse_time(row.get("created_at"))))
    _report(problems, repo, skipped)
    return examples


def parse_labels(value: object) -> list[str]:
    """The dataset stores labels as a list, the string of a list, or "null" for none."""
    if isinstance(value, str):
        return list(ast.literal_eval(value)) if value.startswith("[") else []
    return list(value) if value is not None else []


def split_by_repo(examples: Iterable[Example],
                  held_out_repos: Iterable[str]) -> tuple[list[Example], list[Example]]:
    """(train, held out): whole projects are held out, as the model meets new projects in use."""
    held_out = set(held_out_repos)
    train, test = [], []
    for example in examples:
        (test if example.repo in held_out else train).append(example)
    return train, test


def data_fingerprint(examples: Iterable[Example]) -> str:
    """sha256 of the sorted (text, label) pairs: the same data in any order gives the same value."""
    pairs = sorted((example.text, example.label) for example in examples)
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()
