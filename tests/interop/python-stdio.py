"""Official Python SDK (PyPI package `mcp`) stdio client launching `gatehouse stdio`, as a
local client would: the API key in GATEHOUSE_API_KEY, the database in DATABASE_URL. Lists the
tools and calls `list_projects`. Prints one line per check; exits 1 on the first failure.

With BRIDGE_URL set it launches `gatehouse stdio --url BRIDGE_URL` instead, without
DATABASE_URL: the bridge forwards to the running server over HTTP.

Env: GATEHOUSE_BIN, DATABASE_URL, GATEHOUSE_API_KEY, PROJECT_ID, BRIDGE_URL (set by run.sh).
"""

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def check(name: str, ok: bool, detail: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    if not ok:
        sys.exit(1)


async def main() -> None:
    bridge_url = os.environ.get("BRIDGE_URL")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GATEHOUSE_API_KEY": os.environ["GATEHOUSE_API_KEY"],
        "RUST_LOG": "warn",
    }
    if bridge_url:
        # Bridged to the running server over HTTP: no database on this side.
        args = ["stdio", "--url", bridge_url]
    else:
        args = ["stdio"]
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    params = StdioServerParameters(
        command=os.environ["GATEHOUSE_BIN"], args=args, env=env
    )
    project_id = os.environ["PROJECT_ID"]
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(
                "initialize",
                init.server_info.name == "gatehouse",
                f"{init.server_info.name} {init.server_info.version}, protocol {init.protocol_version}",
            )
            tools = await session.list_tools()
            names = [t.name for t in tools.tools]
            check("tools/list", "list_projects" in names, ", ".join(names))
            result = await session.call_tool("list_projects", {})
            projects = (result.structured_content or {}).get("projects", [])
            check(
                "tools/call list_projects",
                not result.is_error and any(p.get("id") == project_id for p in projects),
                f"{len(projects)} project(s)",
            )


asyncio.run(main())
