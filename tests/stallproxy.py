"""A TCP proxy in front of a server that can hold chosen requests: a stalled network, on demand.

A request whose first bytes match the pattern given to `hold` is not forwarded: its connection's
bytes are kept (the client may give up and close meanwhile) until `release`, when they all go to
the server at once, as a packet stuck in a network and delivered late would. Everything else
flows. Used to put a commit PUT past a lease's term (issue 50: proof by stalls, not only pauses).
"""

from __future__ import annotations

import re
import socket
import threading
from contextlib import suppress


class StallProxy:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._pattern: re.Pattern[bytes] | None = None
        self._release = threading.Event()
        self.held = threading.Event()  # set once a request was held
        self.delivered = threading.Event()  # set once held bytes went to the server
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="stall-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold(self, pattern: bytes) -> None:
        """From now on, hold every request whose start matches `pattern` (a regex)."""
        with self._lock:
            self._pattern = re.compile(pattern)
            self._release.clear()
            self.held.clear()
            self.delivered.clear()

    def stop_holding(self) -> None:
        """Hold no new request; those held stay held until `release`."""
        with self._lock:
            self._pattern = None

    def release(self) -> None:
        """Deliver what is held."""
        self._release.set()

    def close(self) -> None:
        self._closed = True
        self._release.set()
        with suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._upstream, args=(client, server), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client), daemon=True).start()

    def _matches(self, data: bytes) -> bool:
        with self._lock:
            return self._pattern is not None and self._pattern.match(data) is not None

    def _upstream(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                if self._matches(data):
                    ended = self._held(client, data, server)
                    if ended:
                        break
                    continue
                server.sendall(data)
        except OSError:
            pass
        finally:
            with suppress(OSError):
                server.shutdown(socket.SHUT_WR)

    def _held(self, client: socket.socket, first: bytes, server: socket.socket) -> bool:
        """Keep reading the client (it may close) until released, then deliver it all; whether
        the client ended meanwhile."""
        self.held.set()
        kept, ended = [first], False
        client.settimeout(0.1)
        while not self._release.is_set():
            if ended:
                self._release.wait(0.1)
                continue
            try:
                data = client.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                ended = True
                continue
            if data:
                kept.append(data)
            else:
                ended = True
        client.settimeout(None)
        server.sendall(b"".join(kept))
        self.delivered.set()
        return ended

    @staticmethod
    def _downstream(server: socket.socket, client: socket.socket) -> None:
        try:
            while data := server.recv(65536):
                client.sendall(data)
        except OSError:
            pass
        finally:
            with suppress(OSError):
                client.shutdown(socket.SHUT_WR)
            with suppress(OSError):
                server.close()
