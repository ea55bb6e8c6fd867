"""A TCP fault proxy for tests: put it between a client and its database server, then hold,
delay or lose the bytes of one direction, or partition both until the heal.

Its own asyncio loop runs on a daemon thread, so sync and ``async def`` tests drive it the
same way; each control method is thread-safe and acts on the bytes not yet forwarded:

* **Order.** Each connection's bytes keep their order in each direction; a held or delayed
  chunk is never overtaken by a later one of the same direction.
* **Held bytes reach the server at the heal**, even when the client gave up and closed its
  socket meanwhile: its EOF is held behind its bytes (as a partition holds a TCP FIN), and
  the replies to a client that is gone are read and discarded. :meth:`~FaultProxy.
  wait_delivered` waits until nothing is held and the server closed every connection whose
  client had gone (it read, and answered, all it was sent).
* **A lost direction** (:meth:`FaultProxy.lose`): a chunk that arrives is discarded and its
  connection cut, so a request already forwarded may have been applied while its caller sees
  only a broken connection (a lost reply).

>>> with FaultProxy("127.0.0.1", 5432) as proxy:  # doctest: +SKIP
...     pool = ConnectionPool(f"postgresql://app@127.0.0.1:{proxy.port}/app")
...     proxy.partition()
...     ...  # a call through the pool times out
...     proxy.heal()
...     proxy.wait_delivered(timeout=10)
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

__all__ = ["Direction", "FaultProxy", "upstream_of"]

T = TypeVar("T")
_CHUNK = 1 << 16


class Direction(enum.Enum):
    """``UP``: client to server (requests); ``DOWN``: server to client (replies)."""

    UP = "up"
    DOWN = "down"


BOTH = (Direction.UP, Direction.DOWN)


def upstream_of(uri: str, default_port: int) -> tuple[str, int]:
    """``(host, port)`` of a ``mongodb://`` or ``postgresql://`` URI with one host."""
    location = urlsplit(uri).netloc.rsplit("@", 1)[-1]
    if "," in location or not location:
        raise ValueError(f"upstream_of: one host expected in the URI, got {location!r}")
    host, _, port = location.rpartition(":") if ":" in location else (location, "", "")
    return host, int(port) if port else default_port


@dataclass
class _Rule:
    """What happens to one direction's bytes now."""

    open: asyncio.Event
    delay: float = 0.0
    lose: bool = False


@dataclass(eq=False)
class _Link:
    """One client connection and its upstream twin."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    held: dict[Direction, int] = field(default_factory=lambda: dict.fromkeys(BOTH, 0))
    client_gone: bool = False


class FaultProxy:
    """Listen on ``listen_host:listen_port`` (0: any free port, see :attr:`port`) and relay
    each connection to ``upstream_host:upstream_port``, applying the faults set now."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listen = (listen_host, listen_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._rules: dict[Direction, _Rule] = {}
        self.port = 0
        self.discarded = 0  # bytes for clients gone, or eaten by a lost direction

    def start(self) -> FaultProxy:
        """Start listening (idempotent); sets :attr:`port`."""
        if self._server is None:
            self._thread.start()
            self._server = self._call(self._open())
            self.port = self._server.sockets[0].getsockname()[1]
        return self

    def close(self) -> None:
        """Stop listening and cut every connection (held bytes are dropped)."""
        if self._server is not None and self._loop.is_running():
            self._call(self._shut())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._loop.close()
        self._server = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def address(self) -> str:
        """``host:port`` to give the client instead of the server's."""
        return f"{self._listen[0]}:{self.port}"

    def via(self, uri: str) -> str:
        """``uri`` with its host and port replaced by this proxy's (user and path kept)."""
        parts = urlsplit(uri)
        user = parts.netloc.rpartition("@")[0]
        netloc = f"{user}@{self.address()}" if user else self.address()
        return parts._replace(netloc=netloc).geturl()

    # -- faults --------------------------------------------------------------------------

    def hold(self, *directions: Direction) -> None:
        """Keep the bytes of ``directions`` (default: both) until :meth:`release`."""
        self._each(directions or BOTH, lambda rule: rule.open.clear())

    def release(self, *directions: Direction) -> None:
        """Deliver what ``directions`` (default: both) held, in order, and stop holding."""
        self._each(directions or BOTH, lambda rule: rule.open.set())

    def partition(self) -> None:
        """Hold everything, both ways, until :meth:`heal`."""
        self.hold()

    def heal(self) -> None:
        """End a partition: held bytes go on, both ways, in order."""
        self.release()

    def delay(self, seconds: float, *directions: Direction) -> None:
        """Forward each chunk of ``directions`` (default: both) ``seconds`` after it came."""
        self._each(directions or BOTH, lambda rule: setattr(rule, "delay", seconds))

    def lose(self, on: bool = True, *directions: Direction) -> None:
        """Discard chunks of ``directions`` (default: ``DOWN``, the replies) and cut their
        connection, while ``on``."""
        self._each(directions or (Direction.DOWN,), lambda rule: setattr(rule, "lose", on))

    def held(self) -> int:
        """Bytes held now, in both directions."""
        return sum(sum(link.held.values()) for link in list(self._links))

    def wait_delivered(self, timeout: float) -> bool:
        """Whether, within ``timeout`` seconds, nothing is held any more and every
        connection whose client had gone was closed by the server (all it was sent, read)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.held() == 0 and not any(link.client_gone for link in list(self._links)):
                return True
            time.sleep(0.01)
        return False

    # -- inside the loop -------------------------------------------------------------------

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    def _each(self, directions: tuple[Direction, ...], change: Callable[[_Rule], None]) -> None:
        """Apply ``change`` to the rules of ``directions`` on the proxy's loop."""

        async def apply() -> None:
            for direction in directions:
                change(self._rules[direction])

        self._call(apply())

    async def _open(self) -> asyncio.Server:
        # Errors of cut connections are expected: never format them on this thread (on
        # Python 3.11 a traceback formatted here while pytest parses a file can crash it).
        self._loop.set_exception_handler(lambda loop, context: None)
        self._rules = {d: _Rule(asyncio.Event()) for d in BOTH}
        for rule in self._rules.values():
            rule.open.set()
        return await asyncio.start_server(self._accept, *self._listen)

    async def _shut(self) -> None:
        assert self._server is not None
        self._server.close()
        for link in list(self._links):
            link.client.close()
            link.server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            self._tasks.discard(task)
            writer.close()
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        try:
            await asyncio.gather(
                self._pump(link, reader, up_writer, Direction.UP),
                self._pump(link, up_reader, writer, Direction.DOWN),
            )
        except asyncio.CancelledError:
            pass  # closed: end quietly (a cancelled connection task would be logged)
        finally:
            self._links.discard(link)
            self._tasks.discard(task)
            writer.close()
            up_writer.close()

    async def _pump(
        self, link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        direction: Direction,
    ) -> None:  # fmt: skip
        """Relay one direction: a reader task queues the chunks as they come (never held
        back, so a client's EOF is seen at once); this loop applies the rules."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            chunk = b"-"
            while chunk:
                try:
                    chunk = await reader.read(_CHUNK)
                except (ConnectionError, OSError):
                    chunk = b""
                link.held[direction] += len(chunk)
                await queue.put((time.monotonic(), chunk))
            link.client_gone = link.client_gone or direction is Direction.UP

        reading = asyncio.ensure_future(read())
        try:
            await self._relay(link, queue, writer, direction)
        finally:
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)

    async def _relay(
        self, link: _Link, queue: asyncio.Queue[tuple[float, bytes]],
        writer: asyncio.StreamWriter, direction: Direction,
    ) -> None:  # fmt: skip
        rule, to_client = self._rules[direction], direction is Direction.DOWN
        while True:
            came, chunk = await queue.get()
            await rule.open.wait()
            if rule.delay > 0:
                await asyncio.sleep(max(0.0, came + rule.delay - time.monotonic()))
                await rule.open.wait()
            link.held[direction] -= len(chunk)
            if not chunk:  # EOF: pass it on (half-close), so the server ends after reading all
                with contextlib.suppress(OSError, RuntimeError):
                    if writer.can_write_eof():
                        writer.write_eof()
                if to_client:  # the server is done: so is the connection
                    link.client.close()
                    link.server.close()
                return  # (UP: the server's replies still flow DOWN until it closes)
            if rule.lose or (to_client and link.client_gone):
                self.discarded += len(chunk)
                if rule.lose:
                    link.client.close()
                    link.server.close()
                    return
                continue
            try:
                writer.write(chunk)
                await writer.drain()
            except (ConnectionError, OSError):
                if not to_client:
                    return
                link.client_gone = True  # keep reading the server's side to its end
                self.discarded += len(chunk)
