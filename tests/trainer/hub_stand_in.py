"""A stand-in for the Hugging Face hub on loopback: enough of its HTTP protocol for `huggingface_hub`.

It answers what `hf_hub_download`, `snapshot_download`, `HfApi.repo_info`, `list_repo_tree`,
`create_repo` and `upload_folder` call (read in huggingface_hub 2.4's file_download.py, _snapshot_download.py,
hf_api.py and _commit_api.py):

- HEAD/GET `/{datasets/}owner/name/resolve/{revision}/{path}`: `X-Repo-Commit`, `ETag`, and for large files
  (parquet, safetensors, onnx: LFS on the real hub) a 302 to another host name (`localhost` for
  `127.0.0.1`: a "CDN") with `X-Linked-Etag` and `X-Linked-Size`; the CDN honours `Range` (resumed downloads).
- 404s carry `X-Error-Code` (RepoNotFound, RevisionNotFound, EntryNotFound), so the client raises its own
  typed errors.
- GET `/api/{models,datasets}/owner/name[/revision/{rev}]` (repo info with `sha` and `siblings`) and
  `/api/.../tree/{rev}` (the file list, recursive).
- POST `/api/repos/create` (409 when it exists), `/api/validate-yaml` (a README's metadata: valid),
  `/api/.../preupload/{rev}` (every file "regular") and `/api/.../commit/{rev}` (NDJSON: header, base64
  files, deletions) making a new commit.

Faults a test sets: `stall` (file names whose HEAD never answers until the stand-in stops), `token`
(writes need `Authorization: Bearer <token>`), or `stop()` for a hub that cannot be reached. Every request
is kept in `requests` as (method, path).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import pytest

LARGE = (".parquet", ".safetensors", ".onnx", ".bin")  # stored in LFS on the real hub: resolved by a redirect
_RESOLVE = re.compile(r"^/(?P<kind>datasets/)?(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_API = re.compile(r"^/api/(?P<kind>models|datasets)/(?P<repo>[^/]+/[^/]+)"
                  r"(?:/(?P<verb>revision|tree|preupload|commit)/(?P<rev>[^/]+)(?P<path>/.*)?)?$")


@dataclasses.dataclass
class Repo:
    """One repository: its commits (each a full snapshot of files) and its branches."""

    kind: str  # "model" or "dataset"
    repo_id: str
    private: bool = False
    commits: dict[str, dict[str, bytes]] = dataclasses.field(default_factory=dict)
    refs: dict[str, str] = dataclasses.field(default_factory=dict)

    def resolve(self, revision: str) -> str | None:
        revision = unquote(revision)
        return self.refs.get(revision) or (revision if revision in self.commits else None)


class HubStandIn:
    """The hub's HTTP protocol over real sockets, repositories in memory."""

    def __init__(self, host: str = "127.0.0.1"):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.blobs: dict[str, bytes] = {}  # sha256 → content, what the "CDN" serves
        self.stall: set[str] = set()
        self.token: str | None = None
        self.requests: list[tuple[str, str]] = []
        self._released = threading.Event()
        self._connections: set = set()  # open keep-alive sockets: closed by stop(), as a dead hub's are
        self._server = ThreadingHTTPServer((host, 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_port}"
        self.cdn = f"http://localhost:{self._server.server_port}"  # another host name: not followed with auth
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> HubStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the port and every open connection (the hub is now unreachable); let stalled requests go."""
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
        for connection in list(self._connections):
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed by the client
                pass

    def add_files(self, repo_id: str, files: dict[str, bytes], *, kind: str = "dataset",
                  message: str = "upload") -> str:
        """A commit on main adding `files` to the repository (created if new); returns its sha."""
        repo = self.repos.setdefault((kind, repo_id), Repo(kind, repo_id))
        return self._commit(repo, files, (), message)

    def files(self, repo_id: str, *, kind: str = "model", revision: str = "main") -> dict[str, bytes]:
        """The files of a repository at `revision`."""
        repo = self.repos[kind, repo_id]
        return repo.commits[repo.resolve(revision)]

    def _commit(self, repo: Repo, added: dict[str, bytes], deleted, message: str) -> str:
        parent = repo.refs.get("main")
        files = dict(repo.commits.get(parent, {})) | added
        for path in deleted:
            files.pop(path, None)
        digest = hashlib.sha1(json.dumps([parent, message, sorted(
            (path, hashlib.sha256(data).hexdigest()) for path, data in files.items())]).encode())
        sha = digest.hexdigest()
        repo.commits[sha] = files
        repo.refs["main"] = sha
        for data in files.values():
            self.blobs[hashlib.sha256(data).hexdigest()] = data
        return sha

    def wait_released(self, seconds: float) -> None:
        self._released.wait(seconds)


def git_oid(data: bytes) -> str:
    """A file's git blob id, as the hub gives small files for their ETag."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _handler(hub: HubStandIn):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet: the tests read `hub.requests`
            pass

        def setup(self):
            super().setup()
            hub._connections.add(self.connection)

        def finish(self):
            hub._connections.discard(self.connection)
            super().finish()

        def do_HEAD(self):
            self._route("HEAD")

        def do_GET(self):
            self._route("GET")

        def do_POST(self):
            self._route("POST")

        def _route(self, method: str) -> None:
            path = urlsplit(self.path).path
            if hub._released.is_set():  # stopped: a pooled connection gets no answer either
                self.close_connection = True
                return
            hub.requests.append((method, path))
            if path.startswith("/cdn/"):
                return self._cdn(method, path.removeprefix("/cdn/"))
            if method in ("HEAD", "GET") and (match := _RESOLVE.match(path)):
                return self._resolve(method, match)
            if method == "POST" and path == "/api/repos/create":
                return self._create()
            if method == "POST" and path == "/api/validate-yaml":  # upload_folder checks a README's metadata
                self._body()
                return self._send(200, {"errors": [], "warnings": []})
            if match := _API.match(path):
                return self._api(method, match)
            self._send(404, {"error": "Not found"})

        # ---- files
        def _resolve(self, method: str, match) -> None:
            kind = "dataset" if match["kind"] else "model"
            filename = unquote(match["path"])
            if filename in hub.stall:
                hub.wait_released(3600)  # a hub that never answers, until the test stops it
                return
            repo, sha = self._repo_at(kind, match["repo"], match["rev"])
            if repo is None:
                return
            data = repo.commits[sha].get(filename)
            if data is None:
                return self._send(404, {"error": "Entry not found"}, code="EntryNotFound", commit=sha)
            headers = {"X-Repo-Commit": sha}
            if filename.endswith(LARGE):
                digest = hashlib.sha256(data).hexdigest()
                headers |= {"Location": f"{hub.cdn}/cdn/{digest}", "X-Linked-Etag": f'"{digest}"',
                            "X-Linked-Size": str(len(data)), "ETag": f'"{git_oid(data)}"'}
                return self._send(302, b"", headers=headers)
            headers["ETag"] = f'"{git_oid(data)}"'
            self._send(200, data, headers=headers, body=method == "GET")

        def _cdn(self, method: str, digest: str) -> None:
            data = hub.blobs.get(digest)
            if data is None:
                return self._send(404, {"error": "no such blob"})
            ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            if ranged:
                start = int(ranged[1])
                end = int(ranged[2]) if ranged[2] else len(data) - 1
                part = data[start:end + 1]
                return self._send(206, part, headers={"Content-Range": f"bytes {start}-{end}/{len(data)}",
                                                      "ETag": f'"{digest}"'}, body=method == "GET")
            self._send(200, data, headers={"ETag": f'"{digest}"', "Accept-Ranges": "bytes"},
                       body=method == "GET")

        # ---- API
        def _api(self, method: str, match) -> None:
            kind = match["kind"].removesuffix("s")
            verb, revision = match["verb"], match["rev"] or "main"
            if method == "POST" and verb in ("preupload", "commit") and not self._authorised():
                return
            repo, sha = self._repo_at(kind, match["repo"], revision)
            if repo is None:
                return
            if method == "GET" and verb in (None, "revision"):
                files = repo.commits[sha]
                return self._send(200, {"id": repo.repo_id, "sha": sha, "private": repo.private,
                                        "siblings": [{"rfilename": name} for name in sorted(files)]})
            if method == "GET" and verb == "tree":
                prefix = unquote((match["path"] or "/").lstrip("/"))
                return self._send(200, [_tree_entry(name, data) for name, data in sorted(repo.commits[sha].items())
                                        if name.startswith(prefix)])
            if method == "POST" and verb == "preupload":
                files = json.loads(self._body())["files"]
                return self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                                   "shouldIgnore": False} for f in files]})
            if method == "POST" and verb == "commit":
                return self._commit(repo)
            self._send(405, {"error": f"{method} {verb} is not part of the stand-in"})

        def _create(self) -> None:
            if not self._authorised():
                return
            payload = json.loads(self._body())
            kind = payload.get("type") or "model"
            repo_id = f"{payload['organization']}/{payload['name']}"
            if (kind, repo_id) in hub.repos:
                return self._send(409, {"error": "You already created this model repo",
                                        "url": self._url(kind, repo_id)})
            private = payload.get("visibility", "public") != "public"
            repo = hub.repos[kind, repo_id] = Repo(kind, repo_id, private=private)
            hub._commit(repo, {".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"}, (),
                        "initial commit")
            self._send(200, {"url": self._url(kind, repo_id), "name": repo_id})

        def _commit(self, repo: Repo) -> None:
            lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
            header = next(line["value"] for line in lines if line["key"] == "header")
            added = {line["value"]["path"]: base64.b64decode(line["value"]["content"])
                     for line in lines if line["key"] == "file"}
            deleted = [line["value"]["path"] for line in lines if line["key"] == "deletedFile"]
            sha = hub._commit(repo, added, deleted, header["summary"])
            self._send(200, {"commitUrl": f"{self._url(repo.kind, repo.repo_id)}/commit/{sha}",
                             "commitOid": sha, "success": True})

        # ---- helpers
        def _repo_at(self, kind: str, repo_id: str, revision: str):
            repo = hub.repos.get((kind, repo_id))
            if repo is None:
                self._send(404, {"error": "Repository not found"}, code="RepoNotFound")
                return None, None
            sha = repo.resolve(revision)
            if sha is None:
                self._send(404, {"error": f"Invalid rev id: {unquote(revision)}"}, code="RevisionNotFound")
                return None, None
            return repo, sha

        def _authorised(self) -> bool:
            if hub.token is None or self.headers.get("Authorization") == f"Bearer {hub.token}":
                return True
            self._body()
            self._send(401, {"error": "Invalid credentials in Authorization header"})
            return False

        def _url(self, kind: str, repo_id: str) -> str:
            return f"{hub.url}/{'datasets/' if kind == 'dataset' else ''}{repo_id}"

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _send(self, status: int, payload, *, headers: dict | None = None, code: str | None = None,
                  commit: str | None = None, body: bool = True) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream" if isinstance(payload, bytes)
                             else "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in {**(headers or {}), **({"X-Error-Code": code} if code else {}),
                                **({"X-Repo-Commit": commit} if commit else {})}.items():
                self.send_header(name, value)
            self.end_headers()
            if body and self.command != "HEAD":
                self.wfile.write(data)

    return Handler


def _tree_entry(path: str, data: bytes) -> dict:
    entry = {"type": "file", "path": path, "size": len(data), "oid": git_oid(data)}
    if path.endswith(LARGE):
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
    return entry


def point_huggingface_hub_at(url: str, home, monkeypatch) -> None:
    """`huggingface_hub` (already imported, its constants read at import) talks to `url`, caches in `home`;
    the environment says the same to any child process (HF_ENDPOINT, HF_HOME)."""
    from huggingface_hub import constants

    cache = f"{home}/hub"
    template = url + "/{repo_id}/resolve/{revision}/{filename}"
    for name, value in {"ENDPOINT": url, "HUGGINGFACE_CO_URL_TEMPLATE": template,
                        "HF_HOME": str(home), "HF_HUB_CACHE": cache, "HF_XET_CACHE": f"{home}/xet",
                        "HF_TOKEN_PATH": f"{home}/token", "HF_STORED_TOKENS_PATH": f"{home}/stored_tokens",
                        "HF_HUB_OFFLINE": False, "HF_HUB_DISABLE_XET": True}.items():
        monkeypatch.setattr(constants, name, value)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A running stand-in with `huggingface_hub` pointed at it and a fresh cache under tmp_path."""
    stand_in = HubStandIn().start()
    point_huggingface_hub_at(stand_in.url, tmp_path / "hf-home", monkeypatch)
    yield stand_in
    stand_in.stop()
