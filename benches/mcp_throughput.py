"""MCP throughput: sequential tool calls per second through the official Python MCP SDK, for
`memscope mcp` (`remember`) and, when given, the reference MCP memory server
(`@modelcontextprotocol/server-memory`, `add_observations`), in one run on the same client.

    python3 benches/mcp_throughput.py target/release/memscope [--reference PATH/TO/server-memory/dist/index.js]
                           [--calls 2000] [--sizes 0,10000,100000] [--repo ID]

The reference server is installed from the npm registry by the caller (never in CI):
    npm install --prefix /tmp/mcpref @modelcontextprotocol/server-memory
    --reference /tmp/mcpref/node_modules/@modelcontextprotocol/server-memory/dist/index.js

For each store size, the store is prefilled (memscope: through `memscope apply`; the reference:
its JSONL file with that many entities), then `--calls` sequential calls are timed after one
warm-up call. memscope runs at both durabilities: `full` (the default: every commit synced
before it is answered) and `normal`. The reference server writes its file without syncing.
Prints one line per figure and a closing summary.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def timed_calls(params, tool, make_args, calls, setup=None):
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            if setup:
                await setup(s)
            first = await s.call_tool(tool, make_args(-1))
            if first.isError if hasattr(first, "isError") else first.is_error:
                raise SystemExit(f"{tool} failed: {first.content[0].text}")
            start = time.perf_counter()
            for i in range(calls):
                r = await s.call_tool(tool, make_args(i))
                is_error = r.isError if hasattr(r, "isError") else r.is_error
                if is_error:
                    raise SystemExit(f"{tool} call {i} failed: {r.content[0].text}")
            return calls / (time.perf_counter() - start)


def prefill_memscope(bin_, db, n, durability):
    subprocess.run([bin_, "--db", db, "settings", "set", "durability", durability],
                   check=True, capture_output=True)
    if n:
        lines = "".join(
            json.dumps({"subject": "user:bench", "predicate": f"pre_{i}", "value": f"v{i}",
                        "scope": "global", "source": "prefill"}) + "\n"
            for i in range(n)
        )
        subprocess.run([bin_, "--db", db, "apply", "-"], input=lines.encode(), check=True,
                       capture_output=True)


async def memscope_rate(bin_, n, calls, durability, repo=None):
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "bench.db")
        prefill_memscope(bin_, db, n, durability)
        place = ["--repo", repo] if repo else []
        params = StdioServerParameters(
            command=bin_, args=["--db", db, "mcp", "--subject", "user:bench", *place],
            env={"PATH": os.environ.get("PATH", ""), "HOME": d})
        return await timed_calls(
            params, "remember",
            lambda i: {"predicate": f"item_{i}", "value": f"value {i}", "scope": "global",
                       "source": f"bench/{i}"},
            calls)


async def reference_rate(index_js, n, calls):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "memory.jsonl")
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps({"type": "entity", "name": f"pre_{i}", "entityType": "fact",
                                    "observations": [f"v{i}"]}) + "\n")
        params = StdioServerParameters(
            command="node", args=[index_js],
            env={"PATH": os.environ.get("PATH", ""), "MEMORY_FILE_PATH": path})

        async def setup(s):
            await s.call_tool("create_entities", {"entities": [
                {"name": "user", "entityType": "person", "observations": []}]})

        return await timed_calls(
            params, "add_observations",
            lambda i: {"observations": [{"entityName": "user", "contents": [f"item {i}"]}]},
            calls, setup)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--reference")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--sizes", default="0,10000,100000")
    # As an agent host in a repository serves memscope: every global write then carries the
    # place it was made in, and the scope guard judges it.
    ap.add_argument("--repo")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    rows = []
    for n in sizes:
        full = await memscope_rate(a.bin, n, a.calls, "full", a.repo)
        normal = await memscope_rate(a.bin, n, a.calls, "normal", a.repo)
        ref = await reference_rate(a.reference, n, a.calls) if a.reference else None
        line = (f"store of {n:>6} memories: memscope remember {full:7.0f}/s (durability full), "
                f"{normal:7.0f}/s (normal)")
        if ref:
            line += f"; reference add_observations {ref:7.0f}/s; ratio {full / ref:.2f} (full), {normal / ref:.2f} (normal)"
        print(line, flush=True)
        rows.append((n, full, normal, ref))
    empty = rows[0]
    if empty[0] == 0 and empty[3]:
        print(f"summary: on an empty store memscope does {empty[1] / empty[3]:.2f}x the reference "
              f"server's add_observations at durability full ({empty[2] / empty[3]:.2f}x at normal); "
              f"target >= 1.5x")


if __name__ == "__main__":
    asyncio.run(main())
