"""A real MCP client session over stdio with `pgbus-web mcp`, and readings of its results."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import anyio
from mcp import Client, StdioServerParameters

DEFINITIONS = ["--definitions", "pgbus_web.demo.workflows"]


def session(database_url, *options, calls):
    """Spawn `pgbus-web mcp`, run *calls*(client) in the session, return what it returns."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pgbus_web", "mcp", "--database-url", database_url, *DEFINITIONS, *options],
    )

    async def main():
        async with Client(params) as client:
            return await calls(client)

    # In a thread of its own: once the session's Chromium is up (conftest.py),
    # Playwright's sync API holds an event loop on the main thread.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, main).result()


def answer(result) -> dict:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def refusal(result) -> str:
    assert result.is_error, result
    return " ".join(getattr(part, "text", "") for part in result.content)
