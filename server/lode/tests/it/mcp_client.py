"""Drives `lode mcp` over stdio with the official MCP Python SDK (PyPI `mcp`), as an agent's
client would. Reads a plan (a JSON list of steps) on stdin and prints one JSON line per step:

  {"op": "tool", "name": ..., "args": {...}}      -> {"is_error", "structured", "text"}
  {"op": "list_tools"}                            -> {"tools": [{"name", "description", "schema"}]}
  {"op": "list_resources"}                        -> {"uris": [...]}
  {"op": "list_templates"}                        -> {"templates": [...]}
  {"op": "read_resource", "uri": ...}             -> {"text"} or {"error"}
  {"op": "tool_until", "name", "args", "has": "a.b", "secs": 120}
                                                  -> the tool called again until its result has
                                                     a value at that dotted path (or time is up);
                                                     with "empty": "a.b" instead, until the value
                                                     there is an empty list
  {"op": "signal", "path": ...}                   -> writes the file (tells the test where we are)
  {"op": "wait", "path": ..., "secs": 60}         -> waits until the file exists

Usage: python3 mcp_client.py LODE_BINARY ARG... < plan.json   (stdio: the client starts the server)
       python3 mcp_client.py http://127.0.0.1:PORT/mcp < plan.json  (streamable HTTP: a running server)
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def out(v):
    print(json.dumps(v), flush=True)


def transport():
    if sys.argv[1].startswith("http://"):
        return streamable_http_client(sys.argv[1])
    return stdio_client(StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ)))


async def main():
    plan = json.load(sys.stdin)
    async with transport() as streams:
        r, w = streams[0], streams[1]
        async with ClientSession(r, w) as s:
            init = await s.initialize()
            out({"server": init.server_info.name, "protocol": init.protocol_version, "instructions": init.instructions})
            for step in plan:
                op = step["op"]
                if op == "tool":
                    res = await s.call_tool(step["name"], step.get("args", {}))
                    text = "".join(c.text for c in res.content if getattr(c, "type", "") == "text")
                    out({"is_error": bool(res.is_error), "structured": res.structured_content, "text": text})
                elif op == "tool_until":
                    deadline = time.time() + step.get("secs", 120)
                    while True:
                        res = await s.call_tool(step["name"], step.get("args", {}))
                        v = res.structured_content
                        for k in step.get("has", step.get("empty", "")).split("."):
                            v = v.get(k) if isinstance(v, dict) else None
                        if "empty" in step:
                            v = v == []
                        if v not in (None, False) or time.time() > deadline:
                            break
                        await asyncio.sleep(0.2)
                    out({"is_error": bool(res.is_error), "structured": res.structured_content, "found": v not in (None, False)})
                elif op == "list_tools":
                    res = await s.list_tools()
                    out({"tools": [{"name": t.name, "description": t.description, "schema": t.input_schema} for t in res.tools]})
                elif op == "list_resources":
                    res = await s.list_resources()
                    out({"uris": [str(x.uri) for x in res.resources]})
                elif op == "list_templates":
                    res = await s.list_resource_templates()
                    out({"templates": [x.uri_template for x in res.resource_templates]})
                elif op == "read_resource":
                    try:
                        res = await s.read_resource(step["uri"])
                        out({"text": "".join(getattr(c, "text", "") for c in res.contents)})
                    except Exception as e:  # the SDK raises on a JSON-RPC error
                        out({"error": str(e)})
                elif op == "signal":
                    with open(step["path"], "w") as f:
                        f.write("1")
                    out({"signalled": step["path"]})
                elif op == "wait":
                    deadline = time.time() + step.get("secs", 60)
                    while not os.path.exists(step["path"]) and time.time() < deadline:
                        await asyncio.sleep(0.05)
                    out({"waited": os.path.exists(step["path"])})
                else:
                    raise SystemExit(f"unknown op {op}")


asyncio.run(main())
