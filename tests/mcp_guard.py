"""The scope guard as an agent meets it, through the official Python MCP SDK over stdio: the
first seed article's incident replayed by an agent working in `legacy-dashboard`.

    python3 tests/mcp_guard.py MEMSCOPE_BIN DB_PATH

An agent in web-app stores the user's pnpm default (inserted). An agent in legacy-dashboard hears
"这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。", stores install_command in the repo,
then — the scope lost — package_manager = npm as *global*: memscope queues it for a human instead
of superseding pnpm, and says so in the result, so the agent does not retry. A brand-new repo still
gets pnpm. Prints the facts as one JSON object for the Rust harness (tests/mcp/guard.rs).
"""

import asyncio
import json
import os
import sys
import traceback

from mcp_compat import ClientSession, StdioServerParameters, attr, stdio_client, text_of  # noqa: F401

BIN, DB = sys.argv[1], sys.argv[2]
INCIDENT = "这个仓库保留现有的 package-lock.json，安装依赖继续用 npm ci。"
SOURCE = "thread:23/message:14"


async def session(repo, body):
    env = {"MEMSCOPE_ASSERT_INVARIANTS": "1"}
    args = ["--db", DB, "mcp", "--subject", "user:42", "--repo", repo, "--agent", "claude-code"]
    params = StdioServerParameters(command=BIN, args=args, env=env)
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            try:
                return await body(s)
            except BaseException:
                # A failed check inside `async with` would otherwise hang in the SDK's stdio
                # client ("exit cancel scope in a different task") until the harness's kill,
                # showing only "Connection closed": say what failed and end now.
                traceback.print_exc(file=sys.stderr)
                sys.stderr.flush()
                os._exit(1)


async def call(s, name, args):
    result = await s.call_tool(name, args)
    assert not attr(result, "is_error"), (name, args, text_of(result))
    return text_of(result), attr(result, "structured_content")


async def main():
    facts = {}

    async def web_app(s):
        _, data = await call(s, "remember", {
            "predicate": "package_manager", "value": "pnpm", "scope": "global",
            "raw": "以后新建前端项目，默认用 pnpm。", "source": "thread:17/message:86"})
        # A default stated as a default is not queued.
        assert data["outcome"] == "inserted" and data["scope"] == "global", data

    async def legacy(s):
        _, data = await call(s, "remember", {
            "predicate": "install_command", "value": "npm ci", "scope": "repo",
            "raw": INCIDENT, "source": SOURCE})
        assert data["outcome"] == "inserted" and data["scope"] == "repo:legacy-dashboard", data
        text, data = await call(s, "remember", {
            "predicate": "package_manager", "value": "npm", "scope": "global",
            "raw": INCIDENT, "source": SOURCE})
        facts["incident"] = {"text": text, "data": data}
        assert data["outcome"] == "pending", data
        assert data["scope"] == {"ambiguous": ["global", "repo:legacy-dashboard"]}, data
        # The agent is told it waits for a human, why, and not to retry.
        assert "human" in text and "do not write it again" in text, text
        assert "这个仓库" in text and "install_command" in text, text
        # Nothing changed for this repo either: global pnpm still applies here.
        _, data = await call(s, "recall", {"predicate": "package_manager"})
        assert data["found"] and data["value"] == "pnpm" and data["scope"] == "global", data

    async def brand_new(s):
        _, data = await call(s, "recall", {"predicate": "package_manager"})
        assert data["found"] and data["value"] == "pnpm" and data["scope"] == "global", data
        facts["recall_new"] = data

    await session("web-app", web_app)
    await session("legacy-dashboard", legacy)
    await session("brand-new-app", brand_new)
    print(json.dumps(facts, ensure_ascii=False))


asyncio.run(main())
