"""Labelled issues from files, the App's database or the hub dataset, all as the same `Example`s.

Rows that cannot be used (an empty label, no single kind) are reported, never dropped silently: every
loader logs a warning with the count and, given a `skipped` list, appends one `Skipped` per row.
"""

from __future__ import annotations

import ast
import csv
import datetime as dt
import gzip
import hashlib
import io
import json
import logging
import re
import sys
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

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
FILE_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
                ".txt": "fasttext", ".json": "ccims", ".zip": "github-api"}
FORMATS = sorted(set(FILE_FORMATS.values()))
_FASTTEXT_LINE = re.compile(r"^__label__(\S+)\s+(.*)$", re.DOTALL)
_CCIMS_NAME = re.compile(r"^(?P<owner>[^_]+)_(?P<name>.+)_(?P<label>[^_]+)$")  # keras-team_keras_documentation


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


def load_file(path: Path | str, *, format: str | None = None,
              skipped: list[Skipped] | None = None) -> list[Example]:
    """Examples from a labelled file; `format` (default: by suffix) is one of FORMATS.

    csv / jsonl / parquet: columns title, body, label[, repo, created_at]. fasttext: `__label__X text`
    lines (Ticket Tagger). ccims: a JSON list of {"text", "labels"}, body only, the label in the file name.
    github-api: issue objects as GitHub's REST API returns them, in any shape `github_objects` reads.
    """
    path = Path(path)
    kind = format or FILE_FORMATS.get(path.suffix.lower())
    if kind not in FORMATS:
        raise ValueError(f"{path}: unknown file type {path.suffix!r}; use one of {', '.join(FILE_FORMATS)} "
                         f"or name a format ({', '.join(FORMATS)})")
    if kind in ("csv", "jsonl", "parquet"):
        rows = {"csv": _read_csv, "jsonl": _read_jsonl, "parquet": _read_parquet}[kind](path)
        return _to_examples(rows, str(path), skipped)
    load = {"fasttext": load_fasttext, "ccims": load_ccims, "github-api": load_github_issues}[kind]
    return load(path, skipped=skipped)


def load_fasttext(path: Path | str, *, repo: str | None = None,
                  skipped: list[Skipped] | None = None) -> list[Example]:
    """`__label__<label> <title and body>` lines; the label mapped by `kind_of` (enhancement → feature).

    The text is title and body run together, so it is all body; one pair of wrapping quotes is dropped.
    """
    examples, problems = [], []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            match = _FASTTEXT_LINE.match(line.strip())
            kind = kind_of([match.group(1)]) if match else None
            if kind is None:
                problems.append(Skipped(str(path), number, "no __label__ of a kind"))
                continue
            text = match.group(2).strip()
            text = text[1:-1] if len(text) > 1 and text[0] == text[-1] == '"' else text
            examples.append(Example(title="", body=text, label=kind, repo=repo))
    _report(problems, str(path), skipped)
    return examples


def ccims_file_parts(path: Path | str) -> tuple[str, str]:
    """(owner/name, label) from a ccims file name such as `mui-org_material-ui_documentation.json`."""
    match = _CCIMS_NAME.match(Path(path).stem)
    if match is None:
        raise ValueError(f"{path}: not a ccims file name <owner>_<repo>_<label>.json")
    return f"{match['owner']}/{match['name']}", match["label"]


def load_ccims(path: Path | str, *, skipped: list[Skipped] | None = None) -> list[Example]:
    """One ccims file: body-only issues, labelled by the file name (its `labels` lists are unreliable).

    Repeated bodies inside the file are kept once (reported); a label of no kind (`api`) is an error.
    """
    repo, label = ccims_file_parts(path)
    kind = kind_of([label])
    if kind is None:
        raise ValueError(f"{path}: label {label!r} is no kind (bug / enhancement / documentation / question)")
    rows = json.loads(Path(path).read_text(encoding="utf-8"))
    examples, problems, seen = [], [], set()
    for number, row in enumerate(rows, start=1):
        body = (row.get("text") or "").strip()
        if not body or body in seen:
            problems.append(Skipped(str(path), number, "empty body" if not body else "repeated body"))
            continue
        seen.add(body)
        examples.append(Example(title="", body=body, label=kind, repo=repo))
    _report(problems, str(path), skipped)
    return examples


def load_github_issues(path: Path | str, *, skipped: list[Skipped] | None = None) -> list[Example]:
    """Issues (not pull requests) of GitHub REST API objects, in any file `github_objects` reads.

    The repository comes from `repository_url`; the kind from the issue's labels by `kind_of`.
    """
    examples, problems = [], []
    for number, issue in enumerate(github_objects(Path(path)), start=1):
        if issue.get("pull_request"):  # issues carry "pull_request": null, or no such key
            continue
        kind = kind_of(label["name"] for label in issue.get("labels") or [])
        if kind is None:
            problems.append(Skipped(str(path), number, "labels give no single kind"))
            continue
        repo = (issue.get("repository_url") or "").removeprefix("https://api.github.com/repos/") or None
        examples.append(Example(title=issue.get("title") or "", body=issue.get("body") or "", label=kind,
                                repo=repo, created_at=parse_time(issue.get("created_at"))))
    _report(problems, str(path), skipped)
    return sorted(examples, key=lambda e: e.created_at or dt.datetime.min.replace(tzinfo=dt.UTC))


def github_objects(path: Path) -> Iterator[dict]:
    """The GitHub REST API objects of a file as people save them: one per line (.jsonl), a page of them (a
    JSON array, `gh api` output), pages one after another (`gh api --paginate`), gzipped (.gz), or a zip of
    such files (each .json / .jsonl member). Read as a stream: a dump of any size holds one value (a line, a
    page) in memory at a time."""
    if path.suffix.lower() == ".zip":
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if name.endswith((".jsonl", ".json")):
                    with archive.open(name) as member:
                        yield from json_objects(io.TextIOWrapper(member, encoding="utf-8"), f"{path}:{name}")
        return
    with (gzip.open if path.suffix.lower() == ".gz" else open)(path, "rt", encoding="utf-8") as stream:
        yield from json_objects(stream, str(path))


JSON_CHUNK = 1 << 20  # characters read at a time


def json_objects(stream: TextIO, source: str, chunk: int = JSON_CHUNK) -> Iterator[dict]:
    """Each object of the JSON values read from `stream`, one after another (objects, or arrays of objects).
    A value longer than what is buffered is read on in chunks that double, so reading stays linear."""
    decoder, buffer, position, line, ended, want = json.JSONDecoder(), "", 0, 1, False, chunk
    while True:
        skipped = position
        while position < len(buffer) and buffer[position].isspace():
            position += 1
        line += buffer.count("\n", skipped, position)
        value = end = None
        if position < len(buffer):
            try:
                value, end = decoder.raw_decode(buffer, position)
            except json.JSONDecodeError as error:
                if ended:  # the whole rest is buffered: the value is broken, not cut off
                    raise ValueError(f"{source}, line {line}: not JSON ({error.msg}); expected GitHub API issue "
                                     "objects, one per line or in arrays") from None
        elif ended:
            return
        if end is None:  # nothing buffered, or a value that goes on past the buffer
            more = stream.read(want)
            ended = not more
            buffer, position = buffer[position:] + more, 0
            want *= 2
            continue
        want = chunk
        line += buffer.count("\n", position, end)
        position = end
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict):
                raise ValueError(f"{source}: {json.dumps(item)[:60]} is no GitHub API issue object")
            yield item


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
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


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
    # which of the repositories it reads only for being public GitHub shows publicly now (ours ids back;
    # core.visibility.PublicCheck); None: the database's word
    confirm_public: Callable[[list[Repository]], set[int]] | None = None

    def owns(self, repository: Repository) -> bool:
        """Whether it reads this repository as its own (or opted in), not only because it is public."""
        if self.global_model:
            return repository.installation_id is None or repository.installation_id in self.opted_in
        return repository.installation_id == self.installation_id

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
    query = (select(IssueRecord, Repository).join(Repository)
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
    if audience is not None and audience.confirm_public is not None:
        # less the rows of repositories read only for being public that GitHub no longer shows publicly
        shared = {repository.id: repository for _, repository in rows if not audience.owns(repository)}
        public = audience.confirm_public(list(shared.values())) if shared else set()
        rows = [(issue, repository) for issue, repository in rows
                if repository.id not in shared or repository.id in public]
    examples, problems = [], []
    for issue, repository in rows:
        if not issue.confirmed_label.strip():
            problems.append(Skipped("database", issue.id, "empty confirmed label"))
            continue
        examples.append(Example(title=issue.title or "", body=issue.body or "", label=issue.confirmed_label,
                                repo=repository.full_name, created_at=parse_time(issue.opened_at)))
    _report(problems, "database", skipped)
    return examples


def load_hub(repo_names: Sequence[str], *, download: Callable[..., str] = hf_hub_download,
             skipped: list[Skipped] | None = None, revision: str | None = None,
             revisions: set[str] | None = None) -> list[Example]:
    """The lesson's loader: issues (not pull requests) of each project, labelled by `kind_of`.

    `revision` pins the dataset's commit; the commits the files came from are added to `revisions`, for
    the model card, so a later run can ask for exactly the same data.
    """
    examples = []
    pinned = {"revision": revision} if revision else {}
    for repo in repo_names:
        path = download(HUB_DATASET, HUB_PATH.format(repo=repo), repo_type="dataset", **pinned)
        commit = snapshot_revision(Path(path)) or revision
        if revisions is not None and commit:
            revisions.add(commit)
        examples += _hub_examples(Path(path), repo, skipped)
    return examples


def snapshot_revision(path: Path) -> str | None:
    """The commit of a file in the hub cache (`.../snapshots/<40 hex>/...`), or None elsewhere."""
    match = re.search(r"/snapshots/([0-9a-f]{40})(/|$)", path.as_posix())
    return match[1] if match else None


def _hub_examples(path: Path, repo: str, skipped: list[Skipped] | None) -> list[Example]:
    examples, problems = [], []
    rows = (row for row in _read_parquet(path) if str(row.get("is_pull_request")) == "False")
    for number, row in enumerate(rows, start=1):
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


def data_fingerprint(examples: Iterable[Example]) -> str:
    """sha256 of the sorted (text, label) pairs: the same data in any order gives the same value."""
    pairs = sorted((example.text, example.label) for example in examples)
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()
