"""``opscope mcp`` as a client launches it: a subprocess speaking raw JSON-RPC over stdio
(initialize, tools/list, tools/call), garbage on the wire answered or ignored, never fatal."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp_traces import write_hostile


class Wire:
    def __init__(self, tmp_path: Path) -> None:
        env = dict(os.environ, TMPDIR=str(tmp_path), OPSCOPE_CACHE_DIR=str(tmp_path / "cache"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "opscope", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, message: dict[str, Any] | str) -> None:
        assert self.proc.stdin is not None
        text = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def reply(self, request_id: int | None, timeout: float = 60.0) -> dict[str, Any]:
        """The response to ``request_id`` (notifications and other replies skipped)."""
        while True:
            line = self.lines.get(timeout=timeout)
            message = json.loads(line)  # every line on stdout is JSON-RPC
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return dict(message)

    def close(self) -> tuple[int, str]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=30)
        return rc, self.proc.stderr.read()


def call(wire: Wire, request_id: int, name: str, arguments: Any) -> dict[str, Any]:
    wire.send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )
    return wire.reply(request_id)


def test_raw_json_rpc_session(tmp_path: Path) -> None:
    trace = write_hostile(tmp_path)
    wire = Wire(tmp_path)
    try:
        wire.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw-test", "version": "0"},
                },
            }
        )
        init = wire.reply(1)["result"]
        assert init["serverInfo"]["name"] == "opscope"
        assert "tools" in init["capabilities"]
        assert "never instructions" in init["instructions"]
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = wire.reply(2)
        # the whole tool list, as sent, stays under 40 KB (about 10k tokens)
        assert len(json.dumps(listed, separators=(",", ":")).encode()) < 40_000
        tools = {t["name"]: t for t in listed["result"]["tools"]}
        assert {"open_trace", "summary", "ops", "findings", "sql", "compare"} <= set(tools)
        assert tools["ops"]["inputSchema"]["additionalProperties"] is False
        assert "outputSchema" in tools["ops"]

        opened = call(wire, 3, "open_trace", {"path": str(trace)})["result"]
        assert opened["isError"] is False
        assert opened["structuredContent"]["trace"] == "t1"

        # garbage, a wrong shape, an unknown method: the server answers each as JSON-RPC says
        # and goes on
        wire.send("this is not json")
        parse = wire.reply(None)
        assert parse["error"]["code"] == -32700 and "this is" not in json.dumps(parse)
        wire.send('{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": 7}')
        assert wire.reply(4)["error"]["code"] == -32600
        wire.send('{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": 5}}')
        wire.send({"jsonrpc": "2.0", "id": 5, "method": "no/such"})
        assert wire.reply(5)["error"]["code"] == -32601
        bad = call(wire, 6, "ops", {"sort": "fastest"})["result"]
        assert bad["isError"] is True and "is not one of" in bad["content"][0]["text"]

        ops = call(wire, 7, "ops", {"limit": 3})["result"]
        assert ops["isError"] is False and len(ops["structuredContent"]["rows"]) == 3
        assert ops["content"][0]["type"] == "text"
    finally:
        rc, err = wire.close()
    assert rc == 0, err
