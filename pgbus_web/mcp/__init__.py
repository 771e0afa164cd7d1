"""The Model Context Protocol door (``pgbus-web mcp``)."""
