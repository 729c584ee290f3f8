"""An aiohttp artifact server on 127.0.0.1 that also answers the Hugging Face hub API ``huggingface_hub`` uses.

Guarantees:

* files (:class:`Artifact`, bytes in memory or a file on disk) are served with ``ETag``, ``Content-Length``,
  ``Accept-Ranges`` and ``Range``/``If-Range`` (206), on GET and HEAD; the content and ETag can be changed at
  any time; ``corrupt`` serves content that differs from the registered bytes in one byte (the size stays);
* a file on disk (not throttled) is sent with ``sendfile`` (the kernel copies it to the socket; no Python
  reads), so a benchmark measures its clients rather than this server; throttled or in-memory files are
  written in chunks;
* ``throttle`` (bytes per second) slows a file down so a test can kill its client mid-file;
* ``redirect_to`` answers a path with a 302 to the same path on another server;
* with ``ssl_context`` it serves HTTPS (still on 127.0.0.1);
* every request is recorded (method, path, headers, range) and counted per ``(method, path)``;
* :class:`HubRepo` repositories answer ``GET /api/models/ORG/REPO[/revision/REV]`` (with ``blobs=true``:
  siblings with size, blob id and ``lfs`` {sha256, size, pointerSize}) and
  ``GET|HEAD /ORG/REPO/resolve/REV/FILE`` with ``X-Repo-Commit``, ``ETag`` and, for LFS files,
  ``X-Linked-Etag``/``X-Linked-Size``; LFS files may be redirected to a second server, as the hub redirects
  to its CDN; a repository with ``token`` set answers 401 (``X-Error-Code: RepoNotFound``) without
  ``Authorization: Bearer TOKEN``; unknown repositories and revisions answer 404 with the hub's error codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import ssl
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

CHUNK = 256 * 1024


@dataclass
class Artifact:
    """One served file: bytes or a path on disk."""

    content: bytes | None = None
    path: str | None = None
    etag: str | None = None
    throttle: int | None = None
    corrupt: bool = False
    redirect_to: str | None = None

    @property
    def size(self) -> int:
        """The served size."""
        if self.content is not None:
            return len(self.content)
        assert self.path is not None
        return os.path.getsize(self.path)

    def current_etag(self) -> str:
        """The ETag header value."""
        if self.etag is not None:
            return self.etag
        if self.content is not None:
            return '"' + hashlib.md5(self.content, usedforsecurity=False).hexdigest() + '"'
        assert self.path is not None
        st = os.stat(self.path)
        return f'"{st.st_size:x}-{st.st_mtime_ns:x}"'


@dataclass
class HubRepo:
    """A fake hub model repository at one commit.

    A file's content is bytes, or (LFS files only, for large benchmarks) the path of a file on disk whose
    sha256 is given in ``lfs_sha256_override``.
    """

    repo_id: str
    files: dict[str, bytes | str]
    lfs: set[str] = field(default_factory=set)
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    refs: dict[str, str] = field(default_factory=lambda: {"main": ""})
    lfs_sha256_override: dict[str, str] = field(default_factory=dict)
    token: str | None = None
    cdn: str | None = None

    def size(self, name: str) -> int:
        """A file's size."""
        content = self.files[name]
        return len(content) if isinstance(content, bytes) else os.path.getsize(content)

    def artifact(self, name: str, etag: str) -> Artifact:
        """The file as an :class:`Artifact`."""
        content = self.files[name]
        return Artifact(content, etag=etag) if isinstance(content, bytes) else Artifact(path=content, etag=etag)

    def lfs_sha256(self, name: str) -> str:
        """The sha256 the hub reports for an LFS file."""
        if name in self.lfs_sha256_override:
            return self.lfs_sha256_override[name]
        content = self.files[name]
        assert isinstance(content, bytes), "give the sha256 of a file on disk in lfs_sha256_override"
        return hashlib.sha256(content).hexdigest()

    def blob_id(self, name: str) -> str:
        """The git blob sha1 of a file (of its LFS pointer for LFS files)."""
        data = self.files[name] if name not in self.lfs else self.pointer(name)
        assert isinstance(data, bytes), "files on disk must be LFS files"
        return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()

    def pointer(self, name: str) -> bytes:
        """The LFS pointer file."""
        return (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.lfs_sha256(name)}\nsize {self.size(name)}\n"
        ).encode()

    def resolve(self, revision: str) -> str | None:
        """The commit a revision names."""
        if revision == self.commit:
            return self.commit
        if revision in self.refs:
            return self.refs[revision] or self.commit
        return None


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server saw."""

    method: str
    path: str
    headers: dict[str, str]


class ArtifactServer:
    """See the module docstring. Use ``async with ArtifactServer() as server``."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.artifacts: dict[str, Artifact] = {}
        self._ssl_context = ssl_context
        self.repos: dict[str, HubRepo] = {}
        self.requests: list[RecordedRequest] = []
        self.counts: Counter[tuple[str, str]] = Counter()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:PORT``, ``https`` with an SSL context)."""
        scheme = "https" if self._ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def add(self, path: str, artifact: Artifact) -> Artifact:
        """Serve ``artifact`` at ``path`` (starting with ``/``)."""
        self.artifacts[path] = artifact
        return artifact

    def add_repo(self, repo: HubRepo) -> HubRepo:
        """Serve a hub repository."""
        self.repos[repo.repo_id] = repo
        return repo

    def total_requests(self, method: str | None = None) -> int:
        """How many requests were seen (of one method)."""
        return sum(n for (m, _), n in self.counts.items() if method is None or m == method)

    async def __aenter__(self) -> ArtifactServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ssl_context)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(RecordedRequest(request.method, request.path, dict(request.headers)))
        self.counts[(request.method, request.path)] += 1
        if request.path.startswith("/api/models/"):
            return self._model_info(request)
        if "/resolve/" in request.path:
            return await self._resolve(request)
        artifact = self.artifacts.get(request.path)
        if artifact is None or request.method not in ("GET", "HEAD"):
            return web.Response(status=404 if artifact is None else 405)
        if artifact.redirect_to:
            raise web.HTTPFound(artifact.redirect_to.rstrip("/") + request.path)
        return await self._serve(request, artifact, {})

    def _model_info(self, request: web.Request) -> web.Response:
        rest = request.path[len("/api/models/") :]
        repo_id, _, revision = rest.partition("/revision/")
        repo = self.repos.get(repo_id.strip("/"))
        if repo is None or not self._authorized(request, repo):
            return web.json_response(
                {"error": "Repository not found"}, status=401 if repo else 404, headers={"X-Error-Code": "RepoNotFound"}
            )
        commit = repo.resolve(revision or "main")
        if commit is None:
            return web.json_response(
                {"error": "Invalid rev id"}, status=404, headers={"X-Error-Code": "RevisionNotFound"}
            )
        siblings: list[dict[str, Any]] = []
        for name in sorted(repo.files):
            sibling: dict[str, Any] = {"rfilename": name}
            if request.query.get("blobs") == "True" or request.query.get("blobs") == "true":
                sibling["blobId"] = repo.blob_id(name)
                sibling["size"] = repo.size(name) if name not in repo.lfs else len(repo.pointer(name))
                if name in repo.lfs:
                    sibling["lfs"] = {
                        "sha256": repo.lfs_sha256(name),
                        "size": repo.size(name),
                        "pointerSize": len(repo.pointer(name)),
                    }
            siblings.append(sibling)
        return web.json_response({"id": repo.repo_id, "modelId": repo.repo_id, "sha": commit, "siblings": siblings})

    def _authorized(self, request: web.Request, repo: HubRepo) -> bool:
        return repo.token is None or request.headers.get("Authorization") == f"Bearer {repo.token}"

    async def _resolve(self, request: web.Request) -> web.StreamResponse:
        repo_id, _, rest = request.path.lstrip("/").partition("/resolve/")
        revision, _, name = rest.partition("/")
        repo = self.repos.get(repo_id)
        if repo is None or not self._authorized(request, repo):
            return web.Response(status=401 if repo else 404, headers={"X-Error-Code": "RepoNotFound"})
        commit = repo.resolve(revision)
        if commit is None:
            return web.Response(status=404, headers={"X-Error-Code": "RevisionNotFound"})
        if name not in repo.files:
            return web.Response(status=404, headers={"X-Error-Code": "EntryNotFound"})
        headers = {"X-Repo-Commit": commit}
        if name in repo.lfs:
            headers["X-Linked-Etag"] = f'"{repo.lfs_sha256(name)}"'
            headers["X-Linked-Size"] = str(repo.size(name))
            if repo.cdn:
                headers["Location"] = f"{repo.cdn.rstrip('/')}/cdn/{repo.repo_id}/{commit}/{name}"
                return web.Response(status=302, headers=headers)
            etag = f'"{repo.lfs_sha256(name)}"'
        else:
            etag = f'"{repo.blob_id(name)}"'
        artifact = self.artifacts.get(f"/{repo_id}/resolve/{name}") or repo.artifact(name, etag)
        return await self._serve(request, artifact, headers)

    async def _serve(self, request: web.Request, artifact: Artifact, extra: dict[str, str]) -> web.StreamResponse:
        size = artifact.size
        etag = artifact.current_etag()
        start, status = 0, 200
        range_header = request.headers.get("Range")
        if_range = request.headers.get("If-Range")
        if range_header and range_header.startswith("bytes=") and (if_range is None or if_range == etag):
            first, _, last = range_header[6:].partition("-")
            if first.isdigit() and not last:
                start = int(first)
                if start >= size and size:
                    return web.Response(status=416, headers={"Content-Range": f"bytes */{size}"})
                status = 206
        headers = {
            **extra,
            "ETag": etag,
            "Accept-Ranges": "bytes",
            "Content-Length": str(size - start),
            "Content-Type": "application/octet-stream",
        }
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{size - 1}/{size}"
        response = web.StreamResponse(status=status, headers=headers)
        await response.prepare(request)
        if request.method == "HEAD":
            return response
        await self._send_body(request, response, artifact, start, size)
        await response.write_eof()
        return response

    async def _send_body(
        self, request: web.Request, response: web.StreamResponse, artifact: Artifact, start: int, size: int
    ) -> None:
        chunk = CHUNK if artifact.throttle is None else max(1024, artifact.throttle // 20)
        if artifact.content is not None:
            data = artifact.content
            if artifact.corrupt and data:
                flipped = bytearray(data)
                flipped[len(flipped) // 2] ^= 0xFF
                data = bytes(flipped)
            view = memoryview(data)
            for offset in range(start, size, chunk):
                await response.write(view[offset : offset + chunk])
                if artifact.throttle:
                    await asyncio.sleep(chunk / artifact.throttle)
            return
        assert artifact.path is not None
        loop = asyncio.get_running_loop()
        handle = await loop.run_in_executor(None, open, artifact.path, "rb")
        with handle:
            transport = request.transport
            if artifact.throttle is None and transport is not None and size > start:
                # The headers are already on the transport (prepare sends them); the body goes by sendfile.
                with contextlib.suppress(NotImplementedError):
                    await loop.sendfile(transport, handle, start, size - start)
                    return
            handle.seek(start)
            block = 4 * 1024 * 1024 if artifact.throttle is None else chunk
            while data_block := await loop.run_in_executor(None, handle.read, block):
                await response.write(data_block)
                if artifact.throttle:
                    await asyncio.sleep(len(data_block) / artifact.throttle)
