"""Raw peers: fake upstreams that misbehave at the socket or HTTP/2 level, where the demo
upstream (a well-behaved tonic server) cannot.

A peer serves on one port and says which of the bootstrap's clusters it stands in for, so an
`Envoy` can be pointed at it as at the demo upstream.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterable

import h2.config
import h2.connection
import h2.events


class Blackhole:
    """An "upstream" that accepts TCP connections and never answers: a hung service."""

    def __init__(self, *, stands_in_for: Iterable[str]) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.port = self.socket.getsockname()[1]
        self.clusters = dict.fromkeys(stands_in_for, self.port)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection = self.socket.accept()[0]
            except OSError:
                return
            self._handle(connection)

    def _handle(self, connection: socket.socket) -> None:
        self.held.append(connection)

    def stop(self) -> None:
        self.socket.close()
        for connection in self.held:
            connection.close()


class Slammer(Blackhole):
    """An "upstream" that reads what it is sent, then resets the connection mid-exchange."""

    def _handle(self, connection: socket.socket) -> None:
        connection.recv(65536)
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()


# The headers of a gRPC answer, as an upstream sends them.
GRPC_ANSWER_HEADERS = [(b":status", b"200"), (b"content-type", b"application/grpc")]


class RawHttp2Upstream(Blackhole):
    """An HTTP/2 "upstream" that answers every request with the same bytes, whatever gRPC says:
    response headers, then a body and trailers if given. Nothing is validated or normalized, so
    a test can send what a broken or hostile server would."""

    # Sends the headers, then nothing more: an answer that starts and never ends.
    silent = False

    def __init__(self, headers: list[tuple[bytes, bytes]], body: bytes = b"",
                 trailers: list[tuple[bytes, bytes]] | None = None, *, stands_in_for: Iterable[str]) -> None:
        self.headers = headers
        self.body = body
        self.trailers = trailers
        # The request headers and trailers of every request, as received.
        self.received: list[list[tuple[bytes, bytes]]] = []
        self.received_trailers: list[list[tuple[bytes, bytes]]] = []
        super().__init__(stands_in_for=stands_in_for)

    def answer_with(self, headers: list[tuple[bytes, bytes]], body: bytes = b"",
                    trailers: list[tuple[bytes, bytes]] | None = None) -> None:
        """What every later request is answered with."""
        self.headers, self.body, self.trailers = headers, body, trailers

    def _handle(self, connection: socket.socket) -> None:
        self.held.append(connection)
        threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding=None,
                                           validate_outbound_headers=False, normalize_outbound_headers=False)
        peer = h2.connection.H2Connection(config=config)
        peer.initiate_connection()
        if not self._send(connection, peer.data_to_send()):
            return
        # Body bytes that HTTP/2 flow control has not let out yet, by stream.
        pending: dict[int, bytes] = {}
        while data := self._read(connection):
            for event in peer.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    self.received.append(list(event.headers))
                elif isinstance(event, h2.events.TrailersReceived):
                    self.received_trailers.append(list(event.headers))
                elif isinstance(event, h2.events.WindowUpdated):
                    for stream_id in list(pending):
                        self._send_body(peer, stream_id, pending)
                if isinstance(event, h2.events.StreamEnded):
                    self._answer(peer, event.stream_id, pending)
            if not self._send(connection, peer.data_to_send()):
                return

    @staticmethod
    def _read(connection: socket.socket) -> bytes:
        try:
            return connection.recv(65536)
        except OSError:
            return b""

    @staticmethod
    def _send(connection: socket.socket, data: bytes) -> bool:
        """False once the connection is gone, as `_read` reads it: Envoy reset it, or the test
        stopped the peer and closed it while this thread was still answering."""
        try:
            connection.sendall(data)
            return True
        except OSError:
            return False

    def _answer(self, peer: "h2.connection.H2Connection", stream_id: int, pending: dict[int, bytes]) -> None:
        if self.silent:
            peer.send_headers(stream_id, self.headers, end_stream=False)
            return
        ends_with_headers = not self.body and self.trailers is None
        peer.send_headers(stream_id, self.headers, end_stream=ends_with_headers)
        if ends_with_headers:
            return
        pending[stream_id] = self.body
        self._send_body(peer, stream_id, pending)

    def _send_body(self, peer: "h2.connection.H2Connection", stream_id: int, pending: dict[int, bytes]) -> None:
        """Sends what flow control allows of the body, then the trailers once it is all out."""
        body = pending[stream_id]
        while body:
            room = min(peer.local_flow_control_window(stream_id), peer.max_outbound_frame_size)
            if room <= 0:
                pending[stream_id] = body
                return
            chunk, body = body[:room], body[room:]
            peer.send_data(stream_id, chunk, end_stream=not body and self.trailers is None)
        del pending[stream_id]
        if self.trailers is not None:
            peer.send_headers(stream_id, self.trailers, end_stream=True)


def grpc_failure(message: bytes, *, trailers_only: bool = False) -> tuple[list[tuple[bytes, bytes]], bytes,
                                                                      list[tuple[bytes, bytes]] | None]:
    """What a `RawHttp2Upstream` answers to fail a gRPC call with a `grpc-message` of raw bytes
    that need not be UTF-8 (the gRPC wire form is percent-encoded ASCII; a hostile peer need not
    care): its headers, body and trailers, the status in trailers or in a trailers-only answer."""
    status = [(b"grpc-status", b"13"), (b"grpc-message", message)]
    return (GRPC_ANSWER_HEADERS + status, b"", None) if trailers_only else (GRPC_ANSWER_HEADERS, b"", status)


class HeadersThenSilence(RawHttp2Upstream):
    """An HTTP/2 "upstream" that sends a gRPC answer's headers, then nothing more: an answer
    that starts and never ends."""

    silent = True

    def __init__(self, *, stands_in_for: Iterable[str]) -> None:
        super().__init__(GRPC_ANSWER_HEADERS, stands_in_for=stands_in_for)


class HeadersThenReset(HeadersThenSilence):
    """An HTTP/2 "upstream" that sends a gRPC answer's headers, then resets the stream."""

    def _answer(self, peer: "h2.connection.H2Connection", stream_id: int, pending: dict[int, bytes]) -> None:
        peer.send_headers(stream_id, self.headers, end_stream=False)
        peer.reset_stream(stream_id)
