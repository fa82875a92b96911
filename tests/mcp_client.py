"""A real MCP client that is not ours — the official Python SDK (`pip install mcp`) — driving
`memscope mcp` over stdio the way an agent host does.

    python3 tests/mcp_client.py MEMSCOPE_BIN DB_PATH [--transcript]

Runs the first seed article's story through four server sessions (a new web app, the
legacy-dashboard repo, a brand-new repo, and one started with --allow-forget), asserting every
tool result on the way. Prints one JSON object on stdout: the facts the Rust harness
(tests/mcp/python.rs) compares against a database the CLI wrote. With --transcript it prints a
readable transcript instead (used for the README). Exit 3 when the `mcp` package is missing.
"""

import asyncio
import json
import os
import sys
import traceback

from mcp_compat import ClientSession, McpError, StdioServerParameters, attr, stdio_client, text_of  # noqa: F401

BIN, DB = sys.argv[1], sys.argv[2]
TRANSCRIPT = "--transcript" in sys.argv[3:]
LINES = []


def say(line):
    if TRANSCRIPT:
        LINES.append(line)


class Server:
    """One `memscope mcp` process and an initialized client session on it."""

    def __init__(self, *args):
        self.args = list(args)

    async def __aenter__(self):
        env = {"MEMSCOPE_ASSERT_INVARIANTS": "1"}
        params = StdioServerParameters(command=BIN, args=["--db", DB, "mcp", *self.args], env=env)
        self._stdio = stdio_client(params, errlog=sys.stderr)
        read, write = await self._stdio.__aenter__()
        self._session = ClientSession(read, write)
        self.s = await self._session.__aenter__()
        say(f"$ memscope mcp {' '.join(self.args)}")
        self.init = await self.s.initialize()
        info, version = attr(self.init, "server_info"), attr(self.init, "protocol_version")
        say(f"→ initialize   ← {info.name} {info.version}, protocol {version}")
        return self

    async def __aexit__(self, *exc):
        if exc[0] is not None:
            # A failed check inside `async with` would otherwise hang in the SDK's stdio client
            # ("exit cancel scope in a different task") until the test's kill, showing only
            # "Connection closed": say what failed and end now.
            traceback.print_exception(*exc, file=sys.stderr)
            sys.stderr.flush()
            os._exit(1)
        await self._session.__aexit__(*exc)
        await self._stdio.__aexit__(*exc)

    async def tools(self):
        listed = await self.s.list_tools()
        names = [t.name for t in listed.tools]
        say(f"→ tools/list   ← {', '.join(names)}")
        return listed.tools

    async def call(self, name, args, expect_error=False):
        result = await self.s.call_tool(name, args)
        text = text_of(result)
        first = result.content[0].text if result.content else ""
        is_error = bool(attr(result, "is_error"))
        say(f"→ {name} {json.dumps(args, ensure_ascii=False)}")
        for i, line in enumerate(first.split("\n")):
            say(("← " if i == 0 else "  ") + ("[isError] " if is_error and i == 0 else "") + line)
        assert is_error == expect_error, (
            f"{name} {args}: expected isError={expect_error}, got {is_error}: {text}")
        return result, text, attr(result, "structured_content")

    async def remembers(self, args, **expected):
        """A `remember` answered with the `expected` fields: its text and all its fields."""
        _, text, data = await self.call("remember", args)
        assert all(data[k] == v for k, v in expected.items()), (expected, data)
        return text, data

    async def refuses(self, name, args, words):
        """A tool error that says `words`; the session goes on."""
        _, text, _ = await self.call(name, args, expect_error=True)
        assert words in text, text


async def story():
    facts = {}

    # 1. A front-end project: the user states a global default, and something ambiguous.
    async with Server("--subject", "user:42", "--repo", "web-app", "--agent", "claude-code") as srv:
        assert attr(srv.init, "server_info").name == "memscope", attr(srv.init, "server_info")
        assert "user:42" in (srv.init.instructions or ""), srv.init.instructions
        tools = await srv.tools()
        names = sorted(t.name for t in tools)
        assert names == ["list_memories", "recall", "remember"], names
        for t in tools:
            assert attr(t, "input_schema").get("type") == "object", (t.name, attr(t, "input_schema"))
            assert len(t.description or "") > 120, (t.name, t.description)
        remember = next(t for t in tools if t.name == "remember")
        assert attr(remember, "input_schema")["properties"]["scope"]["enum"] == ["global", "repo", "task", "unsure"]
        assert set(attr(remember, "input_schema")["required"]) == {"predicate", "value", "source", "scope"}
        assert "repo:web-app" in remember.description

        text, data = await srv.remembers({
            "predicate": "package_manager", "value": "pnpm", "scope": "global",
            "raw": "以后新建前端项目，默认用 pnpm。", "source": "thread:17/message:86"},
            outcome="inserted", scope="global", version=1)
        assert text.startswith("inserted"), text

        await srv.remembers({
            "predicate": "Formatter", "value": "prettier", "scope": "global",
            "raw": "format with prettier", "source": "thread:17/message:90"},
            outcome="inserted", predicate="formatter")

        text, data = await srv.remembers({
            "predicate": "package_manager", "value": "npm", "scope": "unsure",
            "raw": "以后都用 npm", "source": "thread:31/message:2"},
            outcome="pending", scope={"ambiguous": ["global", "repo:web-app"]})
        assert isinstance(data["pending_id"], int), data
        assert f"pending #{data['pending_id']}" in text, text
        facts["pending_id"] = data["pending_id"]

        # Malformed calls are tool errors; the session goes on.
        for name, args, words in [
            ("remember", {"predicate": 42, "scope": ["global"]}, "`predicate` must be a string"),
            ("remember", {"predicate": "package_manager", "value": "npm",
                          "scope": "repo:legacy-dashboard", "source": "s"},
             "ids come from this server"),
            ("remember", {"predicate": "package_manager", "value": "npm", "scope": "global",
                          "source": "s", "repo": "legacy-dashboard"},
             "unknown argument `repo`"),
            ("remember", {"predicate": "package_manager", "value": None, "scope": "global",
                          "source": "s"},
             "null"),
            ("recall", {}, "missing required argument `predicate`"),
            ("remember", {"predicate": "test_command", "value": "pnpm test", "scope": "task",
                          "source": "s"},
             "without one"),
            # forget is not offered without --allow-forget, and refused if called anyway.
            ("forget", {"predicate": "package_manager", "scope": "all"}, "--allow-forget"),
        ]:
            await srv.refuses(name, args, words)

        # An unknown tool is a protocol error (JSON-RPC), and the session still goes on.
        try:
            await srv.s.call_tool("teleport", {})
            raise AssertionError("an unknown tool should be a protocol error")
        except McpError as err:
            assert "unknown tool" in str(err), err
            say(f"→ teleport {{}}\n← JSON-RPC error: {err}")

        _, text, data = await srv.call("list_memories", {})
        assert [(m["predicate"], m["scope"], m["applies"]) for m in data["memories"]] == [
            ("formatter", "global", True), ("package_manager", "global", True)], data
        assert data["pending"] == 1, data

    # The same subject in another spelling is the same subject: its pending item is counted,
    # and it is named as stored.
    async with Server("--subject", "USER:42", "--repo", "web-app") as srv:
        _, text, data = await srv.call("list_memories", {})
        assert data["pending"] == 1, data
        assert data["subject"] == "user:42", data
        assert "1 write(s) of user:42 wait for a human" in text, text

    # 2. The legacy dashboard keeps npm: a repo rule, not a new global default.
    async with Server("--subject", "user:42", "--repo", "legacy-dashboard", "--agent", "claude-code") as srv:
        await srv.remembers({
            "predicate": "package_manager", "value": "npm", "scope": "repo",
            "raw": "这个仓库保持 npm ci，别换。", "source": "thread:23/message:14"},
            outcome="inserted", scope="repo:legacy-dashboard")

        await srv.remembers({
            "predicate": "package manager", "value": " PNPM ", "scope": "global",
            "source": "thread:24/message:3"},
            outcome="confirmed", version=1)

        await srv.remembers({
            "predicate": "formatter", "value": {"tool": "biome", "version": 2}, "scope": "global",
            "raw": "switch to biome", "source": "thread:27/message:5"},
            outcome="superseded", version=2, previous="prettier")

        _, text, data = await srv.call("recall", {"predicate": "package_manager"})
        assert data["found"] and data["value"] == "npm" and data["scope"] == "repo:legacy-dashboard", data
        chain = [(c["scope"], c["state"]) for c in data["considered"]]
        assert chain == [("repo:legacy-dashboard", "wins"), ("global", "shadowed")], chain
        assert data["logged"] is True, data
        facts["recall_legacy"] = data

        _, text, data = await srv.call("list_memories", {})
        assert [(m["predicate"], m["scope"], m["applies"]) for m in data["memories"]] == [
            ("formatter", "global", True),
            ("package_manager", "repo:legacy-dashboard", True),
            ("package_manager", "global", False)], data

    # 3. A brand-new repository: the global default applies, the legacy rule does not leak.
    async with Server("--subject", "user:42", "--repo", "new-project") as srv:
        _, text, data = await srv.call("recall", {"predicate": "pkg_manager"})
        assert data["found"] and data["value"] == "pnpm" and data["scope"] == "global", data
        chain = [(c["scope"], c["state"]) for c in data["considered"]]
        assert chain == [("repo:new-project", "absent"), ("global", "wins")], chain
        facts["recall_new"] = data
        _, text, data = await srv.call("recall", {"predicate": "coffee"})
        assert data["found"] is False, data
        assert text.startswith("No memory of coffee applies here"), text

    # 4. A server allowed to forget: delete with purge, then the memory stays deleted.
    async with Server("--subject", "user:42", "--task", "早餐🍳", "--allow-forget") as srv:
        tools = await srv.tools()
        names = sorted(t.name for t in tools)
        assert names == ["forget", "list_memories", "recall", "remember"], names
        forget_tool = next(t for t in tools if t.name == "forget")
        assert "a scope where nothing is stored gets no tombstone" in forget_tool.description, \
            forget_tool.description
        await srv.remembers({
            "predicate": "coffee", "value": "oat latte", "scope": "global",
            "raw": "我每天喝燕麦拿铁", "source": "thread:40/message:1"},
            outcome="inserted")
        _, text, data = await srv.call("forget", {"predicate": "coffee", "scope": "all",
                                                  "reason": "user asked"})
        assert data["tombstoned"] == [{"subject": "user:42", "predicate": "coffee",
                                       "scope": "global", "version": 2}], data
        assert data["purged_versions"] == 1, data
        # `all` tombstoned the one scope that held it, and says that the others stay open.
        assert "A scope not named here held nothing, so a later remember there is stored as usual." in text, text
        await srv.remembers({
            "predicate": "coffee", "value": "豆浆 🥛", "scope": "task", "source": "thread:40/message:2"},
            outcome="inserted")
        text, data = await srv.remembers({
            "predicate": "coffee", "value": "espresso", "scope": "global",
            "source": "thread:41/message:1"},
            outcome="rejected")
        assert text.startswith("rejected: the user deleted coffee"), text
        # Forgetting it again blanks the refused write's source (the event stays), then
        # changes nothing and says so: the tombstone keeps its version.
        _, text, data = await srv.call("forget", {"predicate": "coffee", "scope": "global"})
        assert text.startswith("already forgotten: coffee at global (tombstone v2)"), text
        assert "blanked the sources of 1 refused write" in text, text
        assert data["tombstoned"] == [] and data["blanked_sources"] == 1, data
        _, text, data = await srv.call("forget", {"predicate": "coffee", "scope": "global"})
        assert text.startswith("already forgotten, nothing was left to purge: coffee at global (tombstone v2)"), text
        assert data["tombstoned"] == [] and data["already_deleted"][0]["version"] == 2, data
        await srv.refuses("remember", {"predicate": "package_manager", "value": "npm",
                                       "scope": "unsure", "source": "s"}, "without one")
        await srv.refuses("forget", {"predicate": "never_stored", "scope": "global"}, "no memory")

    # 5. Forgetting what only waits in the pending queue is a delete like any other: the item
    # (the user's words) is dropped and every scope it offered tombstoned, so the same write
    # again is rejected instead of queued with the same words.
    async with Server("--subject", "user:42", "--repo", "web-app", "--allow-forget") as srv:
        text, data = await srv.remembers({
            "predicate": "tea", "value": "乌龙 🍵", "scope": "unsure", "source": "thread:42/message:1",
            "raw": "乌龙就好"},
            outcome="pending")
        _, text, data = await srv.call("forget", {"predicate": "tea", "scope": "all"})
        assert [t["scope"] for t in data["tombstoned"]] == ["global", "repo:web-app"], data
        assert data["purged_pending"] == 1, data
        assert text.startswith("forgotten: tea at global (tombstone v1), tea at repo:web-app (tombstone v1)."), text
        await srv.remembers({
            "predicate": "tea", "value": "乌龙 🍵", "scope": "unsure", "source": "thread:42/message:2",
            "raw": "乌龙就好"},
            outcome="rejected")
        await srv.remembers({
            "predicate": "tea", "value": "乌龙 🍵", "scope": "global", "source": "thread:42/message:3"},
            outcome="rejected")

    return facts


def main():
    facts = asyncio.run(story())
    if TRANSCRIPT:
        print("\n".join(LINES))
    else:
        print(json.dumps(facts, ensure_ascii=False))


if __name__ == "__main__":
    main()
