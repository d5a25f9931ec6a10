"""Official Python SDK (PyPI package `mcp`) calling upstream tools through Gatehouse over
Streamable HTTP, holding only a Gatehouse API key: server-everything's `echo` (an HTTP
upstream, as `everything__echo`) and server-memory's `search_nodes` (a stdio upstream run by
Gatehouse, as `memory__search_nodes`, finding the entity upstream-memory.mjs stored). Prints one
line per check; exits 1 on the first failure.

Env: MCP_URL, GATEHOUSE_WRITE_KEY (set by run.sh).
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def check(name: str, ok: bool, detail: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    if not ok:
        sys.exit(1)


def text_of(result) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def main() -> None:
    client = create_mcp_http_client(headers={"X-Api-Key": os.environ["GATEHOUSE_WRITE_KEY"]})
    async with client:
        async with streamable_http_client(os.environ["MCP_URL"], http_client=client) as (
            read,
            write,
            *_,
        ):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                check(
                    "initialize",
                    init.server_info.name == "gatehouse",
                    f"{init.server_info.name}, protocol {init.protocol_version}",
                )
                names = [t.name for t in (await session.list_tools()).tools]
                check(
                    "tools/list has both upstreams' tools",
                    "everything__echo" in names and "memory__search_nodes" in names,
                    ", ".join(n for n in names if "__" in n),
                )
                echo = await session.call_tool("everything__echo", {"message": "from python"})
                check(
                    "tools/call everything__echo (HTTP upstream)",
                    not echo.is_error and text_of(echo) == "Echo: from python",
                    text_of(echo),
                )
                found = await session.call_tool("memory__search_nodes", {"query": "door"})
                body = text_of(found) + json.dumps(found.structured_content or {})
                check(
                    "tools/call memory__search_nodes (stdio upstream)",
                    not found.is_error and "guards the door" in body,
                    body[:120],
                )


asyncio.run(main())
