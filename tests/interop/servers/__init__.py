"""Raw MCP servers for the interop tests: scripts that break the protocol on purpose."""
