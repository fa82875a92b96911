"""Many `memscope mcp` servers driven by the official Python MCP SDK (`pip install mcp`), the way
agent hosts start them: for tests/reliability/open.rs.

    python3 tests/mcp_starts.py starts BIN DB --servers N [--rounds R] [--tag T]
    python3 tests/mcp_starts.py contend BIN DB [--secs S] [--in-flight K]
    python3 tests/mcp_starts.py contend_then_idle BIN DB [--secs S] [--in-flight K] [--calls C]

`starts`: N servers on a database path that does not exist yet, released at one instant. Each
server command is wrapped in a gate: a shell that opens a FIFO for reading, says it is ready
(a file named after its pid, which `exec` keeps for the server), blocks reading the FIFO and then
execs the server. The script holds the FIFO open read+write from before the spawns (so the
shells' opens do not block) and closes it once all N are ready: every shell reads end-of-file at
the same moment. Each server then gets initialize, one `remember` of its own predicate and one
`recall` of it. With --rounds R, round k uses the path `DB.k` (each new). Prints one JSON object:
{"rounds": [{"db": …, "ready": …, "servers": [{"index", "initialized", "outcome", "version",
"recall_value", "error", "stderr"}, …]}, …]}.

`contend`: two servers on DB (created first), each with K (default 4) remember+recall loops in
flight for S seconds (default 3): the server runs each call on a blocking thread, so one process
has several connections open at once while the other process commits. Prints {"calls",
"errors" (every failed call, or a recall that did not return the value just inserted),
"acknowledged" ([predicate, value] of every remember answered inserted, scope global)}.

`contend_then_idle` (the `busy_retries` metric): the same contention (K default 1), then one
server is closed. The other makes one more call (so retries it already took are folded into the
metric), `check --json` gives B1; it then makes C (default 20) sequential remember+recall pairs
with nothing else running, and `check --json` gives B2. It is closed, a fresh server makes C
pairs and B3 is read. Uncontended calls must not move the metric: B1 == B2 == B3. Prints {"b0",
"b1", "b2", "b3", "contention_calls"}; a call that fails while contending fails the script.

Exit 3 when the `mcp` package is missing; every server process is gone when the script exits.
"""

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import anyio  # a dependency of mcp
from mcp_compat import ClientSession, McpError, StdioServerParameters, attr, stdio_client, text_of  # noqa: F401

# Opens the gate for reading (does not block: the script holds a writer), says it is ready,
# waits for end-of-file, then becomes the server (same pid).
GATE = 'exec 3<"$1"; : > "$2/$$"; read x <&3; exec 3<&-; shift 2; exec "$@"'
ENV = {"MEMSCOPE_ASSERT_INVARIANTS": "1"}
CALL_TIMEOUT = 60.0


def error_text(exc):
    if isinstance(exc, TimeoutError):
        return "timed out"
    parts = [f"{type(exc).__name__}: {exc}"]
    for sub in getattr(exc, "exceptions", ()) or ():  # exception groups from task groups
        parts.append(error_text(sub))
    return " | ".join(parts)


def server_args(db, *extra):
    return ["--db", db, "mcp", "--subject", "user:s", "--repo", "r", *extra]


class Server:
    """One `memscope mcp` process (optionally behind the gate) and a client session on it."""

    def __init__(self, bin_path, db, errlog, gate=None):
        self.bin, self.db, self.errlog, self.gate = bin_path, db, errlog, gate
        self.stack = contextlib.AsyncExitStack()
        self.session = None

    async def open(self):
        if self.gate is None:
            params = StdioServerParameters(command=self.bin, args=server_args(self.db), env=ENV)
        else:
            fifo, ready = self.gate
            params = StdioServerParameters(
                command="sh",
                args=["-c", GATE, "sh", fifo, ready, self.bin, *server_args(self.db)],
                env=ENV)
        read, write = await self.stack.enter_async_context(stdio_client(params, errlog=self.errlog))
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        with anyio.fail_after(CALL_TIMEOUT):
            return await self.session.initialize()

    async def call(self, name, args):
        with anyio.fail_after(CALL_TIMEOUT):
            result = await self.session.call_tool(name, args)
        data = attr(result, "structured_content")
        if attr(result, "is_error"):
            raise RuntimeError(f"{name} answered isError: {text_of(result)}")
        return data, text_of(result)

    async def close(self):
        try:  # the SDK bounds its own shutdown (close stdin, wait, kill the process tree)
            await self.stack.aclose()
        except BaseException as exc:  # noqa: BLE001 - closing must not hide the result
            print(f"closing a server: {error_text(exc)}", file=sys.stderr)


def read_file(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def kill_leftovers(ready_dir, db):
    """Kills any server of ours still alive (the ready files are named after their pids)."""
    try:
        names = os.listdir(ready_dir)
    except OSError:
        return
    for name in names:
        try:
            pid = int(name)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except (ValueError, OSError):
            continue
        if db.encode() in cmdline:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


async def one_round(bin_path, db, n, tag, work):
    fifo = os.path.join(work, "gate")
    ready = os.path.join(work, "ready")
    os.mkfifo(fifo)
    os.mkdir(ready)
    gate_fd = os.open(fifo, os.O_RDWR)  # before any spawn: the shells' opens do not block
    results = [{"index": i, "initialized": False, "outcome": None, "version": None,
                "recall_value": None, "error": None, "stderr": ""} for i in range(n)]
    errlogs = [open(os.path.join(work, f"err-{i}"), "w") for i in range(n)]
    servers = [Server(bin_path, db, errlogs[i], gate=(fifo, ready)) for i in range(n)]

    async def drive(i):
        srv, res = servers[i], results[i]
        predicate = f"start_{tag}_{i}"
        value = f"value-{tag}-{i}"
        try:
            init = await srv.open()
            res["initialized"] = attr(init, "server_info").name == "memscope"
            data, text = await srv.call("remember", {
                "predicate": predicate, "value": value, "scope": "repo",
                "source": f"starts:{tag}:{i}"})
            res["outcome"] = (data or {}).get("outcome")
            res["version"] = (data or {}).get("version")
            if res["outcome"] is None:
                res["error"] = f"remember answered without an outcome: {text}"
                return
            data, text = await srv.call("recall", {"predicate": predicate})
            res["recall_value"] = (data or {}).get("value")
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, not raised
            res["error"] = error_text(exc)
        finally:
            await srv.close()

    tasks = [asyncio.ensure_future(drive(i)) for i in range(n)]
    try:
        deadline = time.monotonic() + 30
        while len(os.listdir(ready)) < n and time.monotonic() < deadline:
            if all(t.done() for t in tasks):
                break
            await asyncio.sleep(0.002)
        ready_count = len(os.listdir(ready))
        os.close(gate_fd)  # every waiting shell reads end-of-file now
        gate_fd = None
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 120)
    finally:
        if gate_fd is not None:
            os.close(gate_fd)
        for t in tasks:
            t.cancel()
        kill_leftovers(ready, db)
        for f in errlogs:
            f.close()
    for i, res in enumerate(results):
        res["stderr"] = read_file(os.path.join(work, f"err-{i}"))[-2000:]
    return {"db": db, "ready": ready_count, "servers": results}


async def starts(bin_path, db, n, rounds, tag):
    out = []
    for k in range(rounds):
        path = db if rounds == 1 else f"{db}.{k}"
        work = tempfile.mkdtemp(prefix="memscope-starts-")
        try:
            out.append(await one_round(bin_path, path, n, f"{tag}{k}", work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return {"rounds": out}


def busy_retries(bin_path, db):
    out = subprocess.run([bin_path, "--db", db, "check", "--json"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, **ENV}, check=False)
    try:
        return json.loads(out.stdout)["metrics"]["busy_retries"]
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"check --json gave no metrics ({exc}): {out.stdout} {out.stderr}")


async def pairs(srv, prefix, count):
    for i in range(count):
        data, text = await srv.call("remember", {
            "predicate": f"{prefix}_{i}", "value": f"{prefix}-{i}", "scope": "global",
            "source": f"idle:{prefix}:{i}"})
        assert data and data.get("outcome") == "inserted", (data, text)
        data, text = await srv.call("recall", {"predicate": f"{prefix}_{i}"})
        assert data and data.get("value") == f"{prefix}-{i}", (data, text)


async def contend(a, b, secs, in_flight):
    """Both servers, `in_flight` remember+recall loops each, for `secs` seconds. Returns the
    pairs completed, the failures (each reported, the phase goes on) and every remember that
    was answered inserted, as [predicate, value]."""
    stop_at = time.monotonic() + secs
    done = {"n": 0}
    errors, acked = [], []

    async def hammer(srv, name, lane):
        i = 0
        while time.monotonic() < stop_at and len(errors) <= 50:
            pred = f"contend_{name}_{lane}_{i}"
            i += 1
            try:
                data, text = await srv.call("remember", {
                    "predicate": pred, "value": i, "scope": "global",
                    "source": f"contend:{name}"})
                if not data or data.get("outcome") != "inserted":
                    raise RuntimeError(f"remember {pred} answered {data}: {text}")
                acked.append([pred, i])
                data, text = await srv.call("recall", {"predicate": pred})
                if not data or data.get("value") != i:
                    raise RuntimeError(f"recall {pred} right after it was inserted answered "
                                       f"{json.dumps(data)}: {text}")
                done["n"] += 1
            except Exception as exc:  # noqa: BLE001 - reported in the result
                errors.append(f"server {name}: {error_text(exc)}")
                print(f"contending, {errors[-1]}", file=sys.stderr)

    await asyncio.gather(*[hammer(srv, name, lane)
                           for srv, name in ((a, "a"), (b, "b")) for lane in range(in_flight)])
    return done["n"], errors, acked


def init(bin_path, db):
    subprocess.run([bin_path, "--db", db, "init"], check=True, capture_output=True,
                   env={**os.environ, **ENV}, timeout=60)


@contextlib.asynccontextmanager
async def two_servers(bin_path, db):
    """Servers `a` and `b` on `db`, open; both closed on the way out."""
    a = Server(bin_path, db, sys.stderr)
    b = Server(bin_path, db, sys.stderr)
    try:
        await a.open()
        await b.open()
        yield a, b
    finally:  # LIFO: each session's task group was entered in this task, `a` first
        await b.close()
        await a.close()


async def contend_only(bin_path, db, secs, in_flight):
    init(bin_path, db)
    async with two_servers(bin_path, db) as (a, b):
        calls, errors, acked = await contend(a, b, secs, in_flight)
    return {"calls": calls, "errors": errors, "acknowledged": acked}


async def contend_then_idle(bin_path, db, secs, in_flight, calls):
    init(bin_path, db)
    b0 = busy_retries(bin_path, db)
    async with two_servers(bin_path, db) as (a, b):
        done, errors, _ = await contend(a, b, secs, in_flight)
        if errors:
            raise RuntimeError(f"{len(errors)} call(s) failed while two servers contended; "
                               f"the first: {errors[0]}")
        await b.close()
        # Retries `a` took in its last calls are folded in by its next commit.
        await pairs(a, "flush", 1)
        b1 = busy_retries(bin_path, db)
        await pairs(a, "idle_same", calls)
        b2 = busy_retries(bin_path, db)
    c = Server(bin_path, db, sys.stderr)
    try:
        await c.open()
        await pairs(c, "idle_new", calls)
    finally:
        await c.close()
    b3 = busy_retries(bin_path, db)
    return {"b0": b0, "b1": b1, "b2": b2, "b3": b3, "contention_calls": done}


def option(name, default):
    argv = sys.argv[4:]
    if name in argv:
        return argv[argv.index(name) + 1]
    return default


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    mode, bin_path, db = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "starts":
        result = asyncio.run(starts(bin_path, db, int(option("--servers", "2")),
                                    int(option("--rounds", "1")), option("--tag", "s")))
    elif mode == "contend":
        result = asyncio.run(contend_only(bin_path, db, float(option("--secs", "3")),
                                          int(option("--in-flight", "4"))))
    elif mode == "contend_then_idle":
        result = asyncio.run(contend_then_idle(
            bin_path, db, float(option("--secs", "3")), int(option("--in-flight", "1")),
            int(option("--calls", "20"))))
    else:
        print(f"unknown mode {mode!r}\n{__doc__}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    main()
