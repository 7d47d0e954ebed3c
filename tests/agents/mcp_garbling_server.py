"""A stdio MCP server written by hand that writes lines the SDK cannot parse.

It completes the handshake and lists its tools properly; each tool then answers
with a line that is not JSON-RPC (see ``GARBLED``) and nothing else, so a call can
only end by the client failing it. ``ok`` answers properly. With
``SG_GARBLE_HANDSHAKE`` set, the answer to ``initialize`` is such a line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

GARBLED: dict[str, str] = {
    "prints": "Loading the model weights... done\n",
    "no_jsonrpc": json.dumps({"id": 0, "result": {"content": []}}) + "\n",
    "long_line": "x" * 500 + "\n",
}
"""Each tool's name, and the line it writes instead of its answer."""


def _send(message: Any) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _garble(line: str) -> None:
    sys.stdout.write(line)
    sys.stdout.flush()


def _answer(request_id: Any, method: str, params: Any) -> None:
    if method == "initialize":
        if os.environ.get("SG_GARBLE_HANDSHAKE"):
            _garble("Starting server on stdout, sorry\n")
            return
        result = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "garbling", "version": "1"},
        }
        _send({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {}}
        tools = [{"name": name, "inputSchema": schema} for name in [*GARBLED, "ok"]]
        _send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
    elif method == "tools/call" and params["name"] in GARBLED:
        _garble(GARBLED[params["name"]])  # and no answer: only the client can end the call
    elif method == "tools/call":
        text = {"content": [{"type": "text", "text": "fine"}]}
        _send({"jsonrpc": "2.0", "id": request_id, "result": text})
    else:
        _send({"jsonrpc": "2.0", "id": request_id, "result": {}})


def main() -> None:
    """Read JSON-RPC lines from stdin until it closes."""
    for line in sys.stdin:
        if line.strip():
            message = json.loads(line)
            if message.get("id") is not None:
                _answer(message["id"], message.get("method", ""), message.get("params"))


if __name__ == "__main__":
    main()
