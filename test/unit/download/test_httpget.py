"""The blocking HTTP client of the downloader (``kthena_py.download.sources.httpget``) against the loopback
artifact server: whole and ranged bodies read into a caller's buffer, per-hop credentials, statuses, an abort
from another thread, and HTTPS with the certificate verified. The client blocks, so each call runs in a worker
thread while the servers' event loop keeps serving."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kthena_py.download.credentials import HttpCredentials, Secret
from kthena_py.download.result import DownloadError, Reason
from kthena_py.download.sources.base import TransientError
from kthena_py.download.sources.httpget import HttpBody, HttpGetter
from kthena_py.testing.artifacts import Artifact, ArtifactServer, HubRepo

TOKEN = "hf_httpgetTestToken0123"


def read_all(body: HttpBody, block: int = 64 * 1024) -> bytes:
    buffer = memoryview(bytearray(block))
    out = bytearray()
    try:
        while count := body.readinto(buffer):
            out += buffer[:count]
    finally:
        body.close()
    return bytes(out)


async def fetch(getter: HttpGetter, url: str, offset: int = 0, etag: str | None = None) -> tuple[int, bytes]:
    def run() -> tuple[int, bytes]:
        body = getter.open(url, offset, etag)
        return body.offset, read_all(body)

    return await asyncio.to_thread(run)


async def test_whole_body_into_a_small_reused_buffer(server: ArtifactServer) -> None:
    data = os.urandom(300_001)
    server.add("/m.bin", Artifact(data))
    start, got = await fetch(HttpGetter(HttpCredentials()), f"{server.url}/m.bin")
    assert (start, got) == (0, data)
    sent = server.requests[-1].headers
    assert "Range" not in sent and sent["Accept-Encoding"] == "identity"


async def test_a_file_on_disk_goes_out_by_sendfile_whole_and_ranged(server: ArtifactServer, tmp_path: Path) -> None:
    data = os.urandom(1_000_003)
    path = os.path.join(str(tmp_path), "blob")
    with open(path, "wb") as handle:
        handle.write(data)
    server.add("/disk.bin", Artifact(path=path))
    getter = HttpGetter(HttpCredentials())
    assert await fetch(getter, f"{server.url}/disk.bin") == (0, data)
    assert await fetch(getter, f"{server.url}/disk.bin", 999_000) == (999_000, data[999_000:])


async def test_resume_with_the_same_etag_gets_the_rest(server: ArtifactServer) -> None:
    data = os.urandom(100_000)
    artifact = server.add("/m.bin", Artifact(data))
    start, got = await fetch(HttpGetter(HttpCredentials()), f"{server.url}/m.bin", 40_000, artifact.current_etag())
    assert (start, got) == (40_000, data[40_000:])
    sent = server.requests[-1].headers
    assert sent["Range"] == "bytes=40000-" and sent["If-Range"] == artifact.current_etag()


async def test_resume_against_a_changed_file_restarts_from_zero(server: ArtifactServer) -> None:
    data = os.urandom(50_000)
    server.add("/m.bin", Artifact(data))
    start, got = await fetch(HttpGetter(HttpCredentials()), f"{server.url}/m.bin", 10_000, '"an-older-version"')
    assert (start, got) == (0, data)


async def test_an_offset_past_the_end_is_asked_again_without_a_range(server: ArtifactServer) -> None:
    data = os.urandom(5_000)
    server.add("/m.bin", Artifact(data))
    start, got = await fetch(HttpGetter(HttpCredentials()), f"{server.url}/m.bin", 9_000)
    assert (start, got) == (0, data)
    assert server.counts[("GET", "/m.bin")] == 2
    assert "Range" not in server.requests[-1].headers


async def test_the_token_goes_to_the_hub_and_not_to_the_host_it_redirects_to(
    server: ArtifactServer, cdn: ArtifactServer
) -> None:
    data = os.urandom(70_000)
    repo = server.add_repo(HubRepo("org/m", {"w.bin": data}, lfs={"w.bin"}, token=TOKEN, cdn=cdn.url))
    cdn.add(f"/cdn/org/m/{repo.commit}/w.bin", Artifact(data))
    getter = HttpGetter(HttpCredentials(hf_endpoint=server.url, hf_token=Secret(TOKEN)))
    start, got = await fetch(getter, f"{server.url}/org/m/resolve/{repo.commit}/w.bin")
    assert (start, got) == (0, data)
    assert [r.headers.get("Authorization") for r in server.requests] == [f"Bearer {TOKEN}"]
    assert cdn.requests and all("Authorization" not in r.headers for r in cdn.requests)


async def test_without_the_token_the_hub_denies(server: ArtifactServer) -> None:
    repo = server.add_repo(HubRepo("org/m", {"w.bin": b"x" * 10}, token=TOKEN))
    with pytest.raises(DownloadError) as caught:
        await fetch(HttpGetter(HttpCredentials()), f"{server.url}/org/m/resolve/{repo.commit}/w.bin")
    assert caught.value.reason is Reason.ACCESS_DENIED


async def test_head_follows_redirects_and_reports_the_last_hop(server: ArtifactServer, cdn: ArtifactServer) -> None:
    data = os.urandom(12_345)
    server.add("/m.bin", Artifact(redirect_to=cdn.url))
    artifact = cdn.add("/m.bin", Artifact(data))
    head = await asyncio.to_thread(HttpGetter(HttpCredentials()).head, f"{server.url}/m.bin")
    assert (head.url, head.size, head.etag, head.accept_ranges) == (
        f"{cdn.url}/m.bin",
        len(data),
        artifact.current_etag(),
        True,
    )
    assert server.counts[("HEAD", "/m.bin")] == 1 and cdn.counts[("HEAD", "/m.bin")] == 1


async def test_a_redirect_loop_ends_after_the_limit(server: ArtifactServer, cdn: ArtifactServer) -> None:
    server.add("/m.bin", Artifact(redirect_to=cdn.url))
    cdn.add("/m.bin", Artifact(redirect_to=server.url))
    with pytest.raises(DownloadError) as caught:
        await fetch(HttpGetter(HttpCredentials()), f"{server.url}/m.bin")
    assert caught.value.reason is Reason.DOWNLOAD_FAILED and "redirects" in caught.value.message
    assert server.total_requests() + cdn.total_requests() == 11


async def test_not_found(server: ArtifactServer) -> None:
    with pytest.raises(DownloadError) as caught:
        await fetch(HttpGetter(HttpCredentials()), f"{server.url}/missing.bin")
    assert caught.value.reason is Reason.SOURCE_NOT_FOUND


async def test_a_closed_port_is_transient() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(TransientError):
        await fetch(HttpGetter(HttpCredentials()), f"http://127.0.0.1:{port}/m.bin")


async def test_abort_from_another_thread_ends_a_blocked_read(server: ArtifactServer) -> None:
    server.add("/slow.bin", Artifact(os.urandom(2_000_000), throttle=50_000))
    getter = HttpGetter(HttpCredentials())
    body = await asyncio.to_thread(getter.open, f"{server.url}/slow.bin", 0)
    outcome: list[object] = []

    def reader() -> None:
        try:
            outcome.append(body.readinto(memoryview(bytearray(2_000_000))))
        except TransientError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    await asyncio.sleep(0.2)
    assert thread.is_alive()  # the body needs 40 s at this rate: the read is blocked
    body.abort()
    await asyncio.to_thread(thread.join, 10)  # far less than the 40 s the body would need
    assert not thread.is_alive()
    assert outcome and (isinstance(outcome[0], TransientError) or outcome[0] < 2_000_000)  # type: ignore[operator]
    body.close()


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for IP 127.0.0.1 and its key, written as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kthena-py test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


async def test_https_verifies_the_server_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    data = os.urandom(500_000)
    disk = tmp_path / "blob"
    disk.write_bytes(data)
    async with ArtifactServer(ssl_context=context) as tls:
        tls.add("/m.bin", Artifact(data))
        tls.add("/disk.bin", Artifact(path=str(disk)))
        # An unknown certificate is refused (and a refused connection may be retried, like any other).
        with pytest.raises(TransientError):
            await fetch(HttpGetter(HttpCredentials()), f"{tls.url}/m.bin")
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        getter = HttpGetter(HttpCredentials())
        assert await fetch(getter, f"{tls.url}/m.bin") == (0, data)
        assert await fetch(getter, f"{tls.url}/disk.bin", 123_456) == (123_456, data[123_456:])


async def test_a_body_cut_short_is_transient() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def serve_short_body() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)

        server = threading.Thread(target=serve_short_body)
        server.start()
        try:
            with pytest.raises(TransientError, match="990 bytes short"):
                await fetch(HttpGetter(HttpCredentials()), f"http://127.0.0.1:{port}/m.bin")
        finally:
            await asyncio.to_thread(server.join, 10)
