"""A stdio MCP server written by hand that answers tool calls with broken JSON-RPC.

It completes the handshake and lists its tools properly; then each tool breaks the
protocol its own way (see ``BROKEN``), so a test can check that the client turns
every kind of garbage into a typed error rather than a hang or a raw exception.
``ok`` answers properly, to show the session (or its restart) still works after.
With ``SG_BROKEN_LIST`` set to a mode of ``LISTINGS``, ``tools/list`` is the broken
answer instead. Every request it reads is noted on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

BROKEN: dict[str, str] = {
    "wrong_content": "a content item of a type MCP does not have",
    "content_not_a_list": "content that is a string, not a list",
    "not_a_result": "a result that is a string, not a CallToolResult",
    "structured_not_an_object": "structuredContent that is a list",
    "error_without_code": "a JSON-RPC error object without its code",
    "no_jsonrpc_field": "a response without the jsonrpc version field",
    "not_json": "a line that is not JSON at all",
    "wrong_id": "a response to a request nobody sent (the call is never answered)",
    "half_line_then_exit": "half a JSON line, then the process exits",
}
"""Each tool's name, and how it breaks the protocol."""

LISTINGS: dict[str, Any] = {
    "tools_not_a_list": {"tools": "none"},
    "tool_without_schema_type": {"tools": [{"name": "x", "inputSchema": "not a schema"}]},
}
"""Broken ``tools/list`` results, chosen by ``SG_BROKEN_LIST``."""


def _send(message: Any) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _reply(request_id: Any, result: Any) -> None:
    _send({"jsonrpc": "2.0", "id": request_id, "result": result})


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _tools() -> Any:
    broken = os.environ.get("SG_BROKEN_LIST")
    if broken:
        return LISTINGS[broken]
    schema = {"type": "object", "properties": {}}
    listed = [
        {"name": name, "description": why, "inputSchema": schema} for name, why in BROKEN.items()
    ]
    listed.append({"name": "ok", "description": "Answers properly.", "inputSchema": schema})
    return {"tools": listed}


def _call(request_id: Any, name: str) -> None:
    """Answer a ``tools/call`` the way tool ``name`` breaks it."""
    if name == "ok":
        _reply(request_id, _text("fine"))
    elif name == "wrong_content":
        _reply(request_id, {"content": [{"type": "banana", "peel": True}]})
    elif name == "content_not_a_list":
        _reply(request_id, {"content": "just text"})
    elif name == "not_a_result":
        _reply(request_id, "a string where a CallToolResult belongs")
    elif name == "structured_not_an_object":
        _reply(request_id, {**_text("x"), "structuredContent": [1, 2, 3]})
    elif name == "error_without_code":
        _send({"jsonrpc": "2.0", "id": request_id, "error": {"message": "no code"}})
    elif name == "no_jsonrpc_field":
        _send({"id": request_id, "result": _text("x")})
    elif name == "not_json":
        sys.stdout.write("this is not JSON {\n")
        sys.stdout.flush()
    elif name == "wrong_id":
        _reply(f"{request_id}-someone-else", _text("x"))
    elif name == "half_line_then_exit":
        sys.stdout.write('{"jsonrpc": "2.0", "id": ')
        sys.stdout.flush()
        os._exit(5)
    else:
        _send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": name}})


def main() -> None:
    """Read JSON-RPC lines from stdin until it closes."""
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        print(f"read {method}", file=sys.stderr, flush=True)
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            _reply(
                request_id,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "broken", "version": "1"},
                },
            )
        elif method == "tools/list":
            _reply(request_id, _tools())
        elif method == "tools/call":
            _call(request_id, message["params"]["name"])
        elif method == "ping":
            _reply(request_id, {})
        else:
            _send(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": method}}
            )


if __name__ == "__main__":
    main()
