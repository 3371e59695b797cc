"""An upstream that starts a streamed answer and never finishes it, at the HTTP level (a raw socket server).

`mode="die"`: after two chat chunks the connection is closed in the middle of the chunked body (no terminating
chunk), as when a model server crashes mid-generation. `mode="eof"`: the body is terminated properly but the stream
never sends `[DONE]` (a server that stops early without saying so).
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Literal

Mode = Literal["die", "eof"]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(text: str, finish: bool = False) -> bytes:
    delta = {} if finish else {"content": text}
    chunk = {
        "id": "chatcmpl-broken",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "broken-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


class BrokenStreamUpstream:
    """Serves `POST /v1/chat/completions` (streamed) on loopback, breaking every stream as `mode` says."""

    def __init__(self, mode: Mode = "die") -> None:
        self.mode = mode
        self.requests = 0
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.1)  # accept() wakes up to notice `__exit__`
        self._thread = threading.Thread(target=self._serve, name="broken-upstream", daemon=True)
        self._stopped = False

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"

    def __enter__(self) -> BrokenStreamUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped = True
        self._thread.join(timeout=5)
        self._socket.close()

    def _serve(self) -> None:
        while not self._stopped:
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection.settimeout(5)
            with connection:
                self._answer(connection)

    def _answer(self, connection: socket.socket) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            piece = connection.recv(65536)
            if not piece:
                return
            received += piece
        head, body = received.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            body += connection.recv(65536)
        self.requests += 1
        connection.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
            b"connection: close\r\n\r\n" + _chunk(_event("po")) + _chunk(_event("ng"))
        )
        if self.mode == "eof":
            connection.sendall(b"0\r\n\r\n")  # a well-formed end of the body, but no [DONE]
        # "die": close with the chunked body unterminated
