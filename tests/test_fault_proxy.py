"""The TCP fault proxy (:mod:`flowsched.testing.fault_proxy`) against a small recording echo
server: it relays, holds in order until released, delivers what a partition held - EOF
last - after the client gave up, and a lost direction eats the reply and cuts the
connection while the request still arrives."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from flowsched.testing.fault_proxy import Direction, FaultProxy, upstream_of


class Echo(socketserver.ThreadingTCPServer):
    """Echoes every chunk back and records what each connection received, and its EOF."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), EchoHandler)
        self.received = b""
        self.eofs = 0
        self.changed = threading.Condition()

    def wait(self, condition: object, timeout: float = 10.0) -> bool:
        with self.changed:
            return self.changed.wait_for(condition, timeout)  # type: ignore[arg-type]


class EchoHandler(socketserver.BaseRequestHandler):
    server: Echo

    def handle(self) -> None:
        while chunk := self.request.recv(65536):
            with self.server.changed:
                self.server.received += chunk
                self.server.changed.notify_all()
            with contextlib.suppress(OSError):  # the client may be gone
                self.request.sendall(chunk)
        with self.server.changed:
            self.server.eofs += 1
            self.server.changed.notify_all()


@pytest.fixture
def echo() -> Iterator[Echo]:
    server = Echo()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo: Echo) -> Iterator[FaultProxy]:
    with FaultProxy(*echo.server_address[:2]) as running:  # type: ignore[misc]
        yield running


def until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def connect(proxy: FaultProxy) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    return client


def read_exactly(client: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = client.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_it_relays_both_ways(proxy: FaultProxy) -> None:
    with connect(proxy) as client:
        client.sendall(b"ping")
        assert read_exactly(client, 4) == b"ping"


def test_held_requests_arrive_in_order_at_the_release(proxy: FaultProxy, echo: Echo) -> None:
    with connect(proxy) as client:
        proxy.hold(Direction.UP)
        for part in (b"a", b"b", b"c"):
            client.sendall(part)
        assert until(lambda: proxy.held() == 3)
        assert echo.received == b""  # nothing reached the server meanwhile
        proxy.release(Direction.UP)
        assert read_exactly(client, 3) == b"abc"
        assert echo.received == b"abc"


def test_a_partition_delivers_what_it_held_after_the_client_gave_up(
    proxy: FaultProxy, echo: Echo
) -> None:
    proxy.partition()
    client = connect(proxy)
    client.sendall(b"late delete")
    client.close()  # the caller gave up (its op_timeout)
    assert until(lambda: proxy.held() == len(b"late delete"))
    assert echo.received == b"" and echo.eofs == 0

    proxy.heal()
    assert proxy.wait_delivered(timeout=10)
    assert echo.received == b"late delete"  # the server read it, then the EOF
    assert echo.wait(lambda: echo.eofs == 1)
    assert proxy.discarded == len(b"late delete")  # its reply went to nobody


def test_a_lost_reply_cuts_the_connection_after_the_request_arrived(
    proxy: FaultProxy, echo: Echo
) -> None:
    with connect(proxy) as client:
        proxy.lose()
        client.sendall(b"applied")
        assert echo.wait(lambda: echo.received == b"applied")
        assert read_exactly(client, 7) == b""  # no reply: the connection is cut
    proxy.lose(False)
    with connect(proxy) as again:
        again.sendall(b"ok")
        assert read_exactly(again, 2) == b"ok"


def test_the_uri_helpers_keep_the_user_and_the_path() -> None:
    assert upstream_of("postgresql://app@db.local:5433/app", 5432) == ("db.local", 5433)
    assert upstream_of("mongodb://127.0.0.1/?directConnection=true", 27017) == (
        "127.0.0.1",
        27017,
    )
    with pytest.raises(ValueError, match="one host"):
        upstream_of("mongodb://a:1,b:2/", 27017)
    proxy = FaultProxy("db.local", 5432)
    proxy.port = 4321
    assert proxy.via("postgresql://app@db.local:5432/app") == "postgresql://app@127.0.0.1:4321/app"
