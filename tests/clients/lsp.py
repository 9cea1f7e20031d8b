"""A minimal Language Server Protocol client (JSON-RPC 2.0 over stdio) for tests.

Enough of LSP to drive yaml-language-server the way an editor does: ``initialize``,
``initialized``, ``workspace/didChangeConfiguration``, ``textDocument/didOpen``, requests
such as ``textDocument/completion`` and ``textDocument/hover``, the
``textDocument/publishDiagnostics`` notifications, ``shutdown`` and ``exit``.
Requests the server sends to the client (``workspace/configuration``,
``client/registerCapability``, ...) are answered so the server never waits on us.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Message = dict[str, Any]


class LspError(RuntimeError):
    """The server answered a request with an error, died, or did not answer in time."""


class LspClient:
    """Runs one language server and talks to it; use as a context manager."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        settings: dict[str, Any] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.settings = settings or {}
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
        self._next_id = 0
        self._responses: dict[int, Message] = {}
        self._notifications: list[Message] = []
        self._cond = threading.Condition()
        self._stderr: queue.Queue[bytes] = queue.Queue()
        self.log: list[Message] = []  # every message received, for failure messages
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    # -- transport -------------------------------------------------------------------------
    def _send(self, message: Message) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    with self._cond:
                        self._cond.notify_all()
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if length is None:
                continue
            message = json.loads(stream.read(length))
            self.log.append(message)
            if "method" in message and "id" in message:
                self._answer_server_request(message)
            elif "id" in message:
                with self._cond:
                    self._responses[message["id"]] = message
                    self._cond.notify_all()
            else:
                with self._cond:
                    self._notifications.append(message)
                    self._cond.notify_all()

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.put(line)

    def stderr_text(self) -> str:
        lines = []
        while not self._stderr.empty():
            lines.append(self._stderr.get_nowait().decode(errors="replace"))
        return "".join(lines)

    def _answer_server_request(self, message: Message) -> None:
        result: Any = None
        if message["method"] == "workspace/configuration":
            items = message.get("params", {}).get("items", [])
            result = [self.settings.get(item.get("section", ""), None) for item in items]
        self._send({"id": message["id"], "result": result})

    # -- API -------------------------------------------------------------------------------
    def request(self, method: str, params: Any, *, timeout: float = 30) -> Any:
        self._next_id += 1
        request_id = self._next_id
        self._send({"id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        with self._cond:
            while request_id not in self._responses:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise LspError(f"no answer to {method} ({self.stderr_text()[-2000:]})")
                self._cond.wait(remaining)
            response = self._responses.pop(request_id)
        if "error" in response:
            raise LspError(f"{method}: {response['error']}")
        return response.get("result")

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def wait_for_notification(
        self, method: str, predicate: Callable[[Any], bool], *, timeout: float = 30
    ) -> Any:
        """The params of the first ``method`` notification for which ``predicate`` holds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for note in self._notifications:
                    if note.get("method") == method and predicate(note.get("params")):
                        return note["params"]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    seen = [n.get("method") for n in self._notifications]
                    raise LspError(f"no {method} notification (got {seen})")
                self._cond.wait(remaining)

    def initialize(self, root: Path) -> Any:
        result = self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "capabilities": {
                    "workspace": {"configuration": True, "didChangeConfiguration": {}},
                    "textDocument": {
                        "publishDiagnostics": {"relatedInformation": True},
                        "completion": {"completionItem": {"snippetSupport": True}},
                        "hover": {"contentFormat": ["markdown", "plaintext"]},
                    },
                },
            },
        )
        self.notify("initialized", {})
        if self.settings:
            self.notify("workspace/didChangeConfiguration", {"settings": self.settings})
        return result

    def open(self, path: Path, text: str, language_id: str = "yaml") -> str:
        uri = path.as_uri()
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": language_id, "version": 1, "text": text}},
        )
        return uri

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.request("shutdown", None, timeout=10)
                self.notify("exit", None)
                self.process.wait(timeout=10)
            except (LspError, OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LspClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
