"""`memscope mcp` under the load agent hosts really put on it: the official Python MCP SDK
(`pip install mcp`) as the client, several tool calls in flight at once on one ClientSession
(asyncio.gather of call_tool), and — in `parallel` mode — two servers on one database.
Issue #11: driven this way memscope lost writes it had answered `inserted`, answered calls with
storage errors and could corrupt the file.

    python3 tests/mcp_stress.py parallel BIN DB [--servers 2] [--inflight 6] [--seconds 30] [--seed N]
                                                [--kill-backends] [--idle-kills 6]
    python3 tests/mcp_stress.py kill BIN DB [--inflight 8] [--writes 400] [--seed N]

`parallel`: N servers (`BIN --db DB mcp --repo web-app --subject user:stress`), each session
looping in rounds of `inflight` concurrent calls — mostly `remember` of predicates only this
server writes (`item_{server}_{n}`, sometimes rewritten in a later round), some `remember` of a
few predicates every server contests (`shared_{k}`), plus `recall` and `list_memories`.
With `--kill-backends` (DB a PostgreSQL address) the servers' connections are ended with
`pg_terminate_backend` through `psql`: at random moments while calls are in flight, and — at
least `--idle-kills` times, the run going on past `--seconds` until then — with every server
idle, the round after which must succeed whole (`BackendKiller`).

`kill`: one server; writes fired in parallel batches; about half way through, while a batch is in
flight, the server is killed with SIGKILL. Then the database is listed with the CLI, a fresh
server is started and every one of the writes is replayed (same predicate, value, scope, source).

Prints ONE JSON object on stdout — exactly what the client was told — for the Rust harness
(tests/reliability/mcp.rs) to hold against the database. Diagnostics go to stderr. Every server
process this script starts is gone when it exits, even on error. Exit 3 when the `mcp` package
is missing, 2 on bad usage.
"""

import argparse
import asyncio
import atexit
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import anyio
from mcp_compat import ClientSession, McpError, StdioServerParameters, attr, stdio_client, text_of  # noqa: F401

try:  # Python >= 3.11
    _GROUP = BaseExceptionGroup  # noqa: F821
except NameError:  # pragma: no cover
    _GROUP = Exception

SUBJECT = "user:stress"
REPO = "web-app"
ACKNOWLEDGED = ("inserted", "superseded", "confirmed")
# The server is started through `sh`, which writes its own pid and then execs memscope: the pid
# in the file is the memscope process itself (exec keeps the pid), whatever the SDK does.
WRAPPER = 'echo $$ > "$1"; shift; exec "$@"'

BIN = DB = None
WORKDIR = None
SPAWNED = []  # pids of every server this script started


def log(msg):
    print(f"mcp_stress: {msg}", file=sys.stderr, flush=True)


def _is_our_server(pid):
    """The pid is alive and still a memscope process on our database (not a recycled pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return DB.encode() in argv and any(a.endswith(b"memscope") or a == BIN.encode() for a in argv)


def kill_server(pid):
    if _is_our_server(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # Reap it if it is our child (it is the SDK's child; the SDK reaps it normally).
        for _ in range(200):
            if not _is_our_server(pid) or _is_zombie(pid):
                break
            time.sleep(0.01)


def _is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def reap_all():
    """Every server this script started is gone (SIGKILL to any survivor)."""
    for pid in SPAWNED:
        kill_server(pid)


def _die(signum, _frame):
    """Killed from outside (the harness timed out): no asyncio teardown, just no survivors."""
    reap_all()
    os._exit(128 + signum)


atexit.register(reap_all)
signal.signal(signal.SIGTERM, _die)
signal.signal(signal.SIGHUP, _die)
signal.signal(signal.SIGINT, _die)


class Server:
    """One `memscope mcp` process and an initialized client session on it."""

    def __init__(self, tag):
        self.tag = tag
        self.pid = None
        self.pidfile = os.path.join(WORKDIR, f"server-{tag}.pid")
        self.errpath = os.path.join(WORKDIR, f"server-{tag}.stderr")

    async def __aenter__(self):
        env = {
            "MEMSCOPE_ASSERT_INVARIANTS": "1",
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", WORKDIR),
        }
        args = ["-c", WRAPPER, "sh", self.pidfile,
                BIN, "--db", DB, "mcp", "--repo", REPO, "--subject", SUBJECT]
        params = StdioServerParameters(command="/bin/sh", args=args, env=env)
        self._errlog = open(self.errpath, "a")
        self._stdio = stdio_client(params, errlog=self._errlog)
        read, write = await self._stdio.__aenter__()
        try:
            for _ in range(1000):
                try:
                    with open(self.pidfile) as f:
                        self.pid = int(f.read().strip())
                    break
                except (OSError, ValueError):
                    await asyncio.sleep(0.01)
            if self.pid is None:
                raise RuntimeError(f"server {self.tag} never wrote its pid to {self.pidfile}")
            SPAWNED.append(self.pid)
            self._session = ClientSession(read, write)
            self.s = await self._session.__aenter__()
            with anyio.fail_after(30):
                await self.s.initialize()
        except Exception as e:
            await self.close()
            raise RuntimeError(f"server {self.tag} did not start ({type(e).__name__}: {e}); "
                               f"its stderr: {self.stderr_tail(1000).strip()!r}") from e
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self):
        """Ends the session and the process; never raises (the server may be dead already)."""
        for cm in (getattr(self, "_session", None), getattr(self, "_stdio", None)):
            if cm is None:
                continue
            try:
                # No cancel scope around this: the SDK's own task groups must exit as the innermost
                # scope, and it bounds every wait of its shutdown itself.
                await cm.__aexit__(None, None, None)
            except (Exception, _GROUP) as e:  # noqa: BLE001 - teardown after a kill is noisy
                log(f"server {self.tag}: teardown: {type(e).__name__}: {e}")
        self._session = self._stdio = None
        if self.pid is not None:
            kill_server(self.pid)
        self._errlog.close()

    async def __aexit__(self, *exc):
        await self.close()

    def stderr_tail(self, chars=3000):
        try:
            with open(self.errpath, errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return ""

    async def call(self, name, args, timeout):
        """One tool call; returns what the client was told, never raises."""
        rec = {"server": self.tag, "tool": name, "args": args}
        started = time.monotonic()
        try:
            with anyio.fail_after(timeout):
                result = await self.s.call_tool(name, args)
        except TimeoutError:
            rec["exception"] = f"no answer within {timeout} s"
        except McpError as e:
            rec["exception"] = f"MCP error: {e}"
        except (Exception, _GROUP) as e:  # noqa: BLE001 - everything the client saw is recorded
            rec["exception"] = f"{type(e).__name__}: {e}"
        else:
            rec["is_error"] = bool(attr(result, "is_error"))
            rec["text"] = text_of(result)
            rec["data"] = attr(result, "structured_content")
        rec["ms"] = round((time.monotonic() - started) * 1000, 1)
        return rec


def error_entry(rec, phase=None):
    text = rec.get("exception") or rec.get("text") or ""
    e = {"server": rec["server"], "tool": rec["tool"], "args": rec["args"],
         "kind": "exception" if "exception" in rec else "isError", "text": text}
    if phase is not None:
        e["phase"] = phase
    return e


def is_failure(rec):
    return "exception" in rec or rec.get("is_error")


def ack_entry(rec, **extra):
    d = rec["data"] or {}
    e = {
        "server": rec["server"],
        "outcome": d.get("outcome"),
        "predicate": d.get("predicate"),
        "scope": d.get("scope"),
        "value": d.get("value"),
        "version": d.get("version"),
        "source": rec["args"]["source"],
        "requested": {k: rec["args"][k] for k in ("predicate", "value", "scope")},
    }
    e.update(extra)
    return e


def scope_id(scope):
    return f"repo:{REPO}" if scope == "repo" else scope


def mismatch(rec):
    """An answer that is not about the write that was asked for (a crossed reply)."""
    d = rec["data"] or {}
    a = rec["args"]
    if (d.get("predicate"), d.get("scope"), d.get("value")) != (a["predicate"], scope_id(a["scope"]), a["value"]):
        return {"server": rec["server"], "asked": a, "answered": d}
    return None


# ---------------------------------------------------------------------------------------------
# parallel

# What the server answers a call whose PostgreSQL connection was cut (src/store/postgres/store.rs,
# `explain` and `reopen`), by what it says was stored.
LOST_WORDINGS = (
    ("unstored", "before this call's open transaction committed, so the server rolls that transaction "
                 "back (at once, or once it notices the connection is gone) and nothing of it was stored"),
    ("uncertain", "what this call wrote may or may not have been committed"),
    ("logged", "while this read's row of the read log was being committed: the read may or may not "
               "have been logged"),
    ("read", "this call only reads, so nothing was written"),
    # Cut again while it connected: nothing of the call was sent.
    ("reconnect", "was lost, and connecting again failed"),
)
# The tools that lead the rounds after idle kills, in turn.
LEAD_TOOLS = ("remember", "recall", "list_memories")
TERMINATE = ("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
             "WHERE datname = current_database() AND application_name = 'memscope' "
             "AND pid <> pg_backend_pid()")
# Only a connection inside a statement or a transaction: one a call is using.
MID_CALL = " AND state IN ('active', 'idle in transaction')"
DONE = "__mcp_stress_done__"


def lost_connection(rec):
    """What a failed call's answer says of its cut connection: "unstored", "uncertain", "logged",
    "read", "reconnect", or None when it is not one of the server's lost-connection answers."""
    text = rec.get("text") or ""
    if "exception" in rec or not text.startswith(f"{rec['tool']} failed") \
            or "the connection to PostgreSQL at " not in text:
        return None
    return next((kind for kind, words in LOST_WORDINGS if words in text), None)


class BackendKiller:
    """Ends the servers' PostgreSQL connections, `pg_terminate_backend` through psql, waiting
    until each backend is gone. In stretches it kills at random moments while calls are in
    flight; between stretches it asks for quiet: each session runs one more round (no kill can
    land in it, so it leaves every server connected), waits, the killer ends every server's idle
    connection, and each session runs one round more. Those two rounds are strict: a server
    connects again before a call, so none of their calls may fail."""

    def __init__(self, servers, rng, deadline, min_idle):
        self.cond = asyncio.Condition()
        self.rng = rng
        self.deadline = deadline
        self.min_idle = min_idle
        self.active = set(range(servers))
        self.quiet = False
        self.settled = set()  # sessions that ran their round in the quiet and wait for the kill
        self.probing = set()  # sessions running the round after an idle kill
        self.running = True
        self.psql = None  # one psql session for every kill: a poll is a round trip, not a process
        self.errpath = os.path.join(WORKDIR, "psql.stderr")
        self.report = {"idle": [], "in_flight": 0, "in_flight_terminated": 0, "mid_call": 0,
                       "mid_call_terminated": 0, "failures": []}

    async def round_kind(self, idx):
        """How the session's next round stands to the kills: "settle", "probe" or None."""
        async with self.cond:
            if not self.quiet:
                return None
            if idx not in self.settled:
                return "settle"
            self.cond.notify_all()
            await self.cond.wait_for(lambda: idx in self.probing or not self.quiet)
            return "probe" if idx in self.probing else None

    async def round_done(self, idx, kind):
        async with self.cond:
            if kind == "settle":
                self.settled.add(idx)
            elif kind == "probe":
                self.probing.discard(idx)
            self.cond.notify_all()

    async def leave(self, idx):
        async with self.cond:
            self.active.discard(idx)
            self.settled.discard(idx)
            self.probing.discard(idx)
            self.cond.notify_all()

    async def terminate(self, where=""):
        """How many of the servers' backends `pg_terminate_backend` ended (`where` narrows them);
        raises when psql cannot say (said in the report)."""
        try:
            if self.psql is None:
                with open(self.errpath, "w") as errlog:
                    self.psql = await asyncio.create_subprocess_exec(
                        shutil.which("psql") or "/usr/bin/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                        "-d", DB, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog)
            self.psql.stdin.write(f"{TERMINATE}{where};\n\\echo {DONE}\n".encode())
            await self.psql.stdin.drain()
            said = []
            while True:
                line = (await asyncio.wait_for(self.psql.stdout.readline(), 60)).decode(errors="replace")
                if not line:
                    raise EOFError("psql ended")
                if line.strip() == DONE:
                    break
                said.extend(line.split())
            if any(w not in ("t", "f") for w in said):
                raise ValueError(f"psql answered {said!r}")
        except (OSError, EOFError, ValueError, asyncio.TimeoutError) as e:
            with open(self.errpath, errors="replace") as f:
                stderr = f.read()[-1000:].strip()
            self.report["failures"].append(f"psql: {type(e).__name__}: {e}; its stderr: {stderr!r}")
            raise
        # "f": the backend was gone already, or did not end within the 10 s it was given.
        return said.count("t")

    async def kill_mid_call(self):
        """Ends the connections a call is using, as soon as there is one (about 3 s at most)."""
        for _ in range(400):
            ended = await self.terminate(MID_CALL)
            if ended:
                return ended
            await asyncio.sleep(0.005)
        return 0

    async def run(self):
        try:
            while self.active and (time.monotonic() < self.deadline or len(self.report["idle"]) < self.min_idle):
                for _ in range(self.rng.randint(2, 4)):
                    await asyncio.sleep(self.rng.uniform(0.3, 0.8))
                    # Half the kills take whatever they find, idle between calls or not; half
                    # wait for a call's statement or transaction, so a run cuts calls for sure.
                    kind = "mid_call" if self.rng.random() < 0.5 else "in_flight"
                    ended = await (self.kill_mid_call() if kind == "mid_call" else self.terminate())
                    self.report[kind] += 1
                    self.report[f"{kind}_terminated"] += ended
                async with self.cond:
                    self.quiet = True
                    await self.cond.wait_for(lambda: self.active <= self.settled)
                    if not self.active:
                        break
                    idle = sorted(self.active)
                    ended = await self.terminate()
                    self.report["idle"].append({"servers": len(idle), "terminated": ended})
                    self.probing = set(idle)
                    self.settled.clear()
                    self.quiet = False
                    self.cond.notify_all()
                    await self.cond.wait_for(lambda: not (self.probing & self.active))
        finally:
            async with self.cond:
                self.running = False
                self.quiet = False
                self.probing.clear()
                self.cond.notify_all()
            if self.psql is not None:
                if self.psql.returncode is None:
                    self.psql.stdin.close()
                    try:
                        await asyncio.wait_for(self.psql.wait(), 10)
                    except asyncio.TimeoutError:
                        self.psql.kill()
                        await self.psql.wait()


async def parallel_session(idx, opts, deadline, out, killer):
    rng = random.Random(opts.seed * 1000 + idx)
    n = 0
    mine = {}  # predicate -> {"scope", "value"} acknowledged in an earlier round (only we write it)
    rounds = probes = 0
    async with Server(f"p{idx}") as srv:
        out["pids"].append(srv.pid)
        while (killer.running if killer else time.monotonic() < deadline):
            rounds += 1
            kind = await killer.round_kind(idx) if killer else None
            busy = set()  # predicates of ours touched in this round
            plan = []
            for _ in range(opts.inflight):
                r = rng.random()
                if r < 0.55 or not mine:
                    pred = f"item_{idx}_{n}"
                    args = {"predicate": pred, "value": f"v{idx}-{n}",
                            "scope": rng.choice(("global", "repo")), "source": f"w{idx}/m{n}"}
                    plan.append(("remember", args, {"contested": False}))
                    busy.add(pred)
                    n += 1
                elif r < 0.65:
                    free = sorted(set(mine) - busy)
                    if not free:
                        continue
                    pred = rng.choice(free)
                    args = {"predicate": pred, "value": f"v{idx}-{n}",
                            "scope": mine[pred]["scope"], "source": f"w{idx}/m{n}"}
                    plan.append(("remember", args, {"contested": False, "rewrite": True}))
                    busy.add(pred)
                    n += 1
                elif r < 0.85:
                    args = {"predicate": f"shared_{rng.randrange(3)}", "value": f"w{idx}-c{n}",
                            "scope": rng.choice(("global", "repo")), "source": f"w{idx}/m{n}"}
                    plan.append(("remember", args, {"contested": True}))
                    n += 1
                elif r < 0.95:
                    free = sorted(set(mine) - busy)
                    if free:
                        pred = rng.choice(free)
                        busy.add(pred)
                        plan.append(("recall", {"predicate": pred}, {"expect": mine[pred]["value"]}))
                    else:
                        plan.append(("recall", {"predicate": f"shared_{rng.randrange(3)}"}, {}))
                else:
                    args = {} if rounds % 25 == 0 else {"predicate": f"shared_{rng.randrange(3)}"}
                    plan.append(("list_memories", args, {}))
            if kind and not plan:
                plan.append(("list_memories", {}, {}))  # a strict round connects its server
            first = []
            if kind == "probe":
                # The first call after an idle kill goes alone, each tool in turn: each must find
                # the connection gone and open it again.
                lead = LEAD_TOOLS[(probes + idx) % len(LEAD_TOOLS)]
                probes += 1
                at = next((i for i, (name, _, _) in enumerate(plan) if name == lead), None)
                if at is not None:
                    plan.insert(0, plan.pop(at))
                elif lead == "recall":
                    plan.insert(0, ("recall", {"predicate": f"shared_{rng.randrange(3)}"}, {}))
                elif lead == "list_memories":
                    plan.insert(0, ("list_memories", {}, {}))
                first = [await srv.call(plan[0][0], plan[0][1], opts.timeout)]
            recs = first + await asyncio.gather(
                *(srv.call(name, args, opts.timeout) for name, args, _ in plan[len(first):]))
            if killer:
                await killer.round_done(idx, kind)
                out["strict_rounds"] += kind is not None
            for (name, args, meta), rec in zip(plan, recs):
                out["calls"] += 1
                if is_failure(rec):
                    e = error_entry(rec)
                    lost = lost_connection(rec) if killer else None
                    if killer:
                        # No kill can cut a call of a strict round: its failure is the server's.
                        e.update(lost=lost, strict=kind, round=rounds)
                    out["errors"].append(e)
                    if name == "remember" and lost in ("unstored", "reconnect"):
                        out["unstored"].append({"server": idx, "predicate": args["predicate"],
                                                "scope": scope_id(args["scope"]), "value": args["value"]})
                    elif name == "remember":
                        # Maybe stored: the predicate's value is unknown from here on.
                        out["uncertain"].append({"server": idx, "predicate": args["predicate"],
                                                 "scope": scope_id(args["scope"]), "value": args["value"]})
                        mine.pop(args["predicate"], None)
                    continue
                if name == "remember":
                    d = rec["data"] or {}
                    if d.get("outcome") not in ACKNOWLEDGED:
                        out["unexpected"].append({"server": idx, "args": args, "answered": d, "text": rec["text"]})
                        continue
                    m = mismatch(rec)
                    if m:
                        out["mismatches"].append(m)
                    out["acknowledged"].append(ack_entry(rec, contested=meta["contested"], round=rounds))
                    if not meta["contested"]:
                        mine[args["predicate"]] = {"scope": args["scope"], "value": args["value"]}
                elif name == "recall" and "expect" in meta:
                    d = rec["data"] or {}
                    if not d.get("found") or d.get("value") != meta["expect"]:
                        out["read_mismatches"].append({"server": idx, "predicate": args["predicate"],
                                                       "expected": meta["expect"], "answered": d})
        out["rounds"] += rounds
        out["rounds_per_server"][idx] = rounds
        out["stderr"][srv.tag] = srv.stderr_tail()


async def parallel(opts):
    out = {"mode": "parallel", "seed": opts.seed, "servers": opts.servers, "inflight": opts.inflight,
           "seconds": opts.seconds, "acknowledged": [], "errors": [], "unexpected": [],
           "mismatches": [], "read_mismatches": [], "calls": 0, "rounds": 0,
           "rounds_per_server": {}, "pids": [], "stderr": {}, "unstored": [], "uncertain": [],
           "strict_rounds": 0}
    started = time.monotonic()
    deadline = started + opts.seconds
    killer = None
    if opts.kill_backends:
        killer = BackendKiller(opts.servers, random.Random(opts.seed * 1000 - 1), deadline, opts.idle_kills)

    async def session(i):
        try:
            await parallel_session(i, opts, deadline, out, killer)
        finally:
            if killer:
                await killer.leave(i)

    sessions = [session(i) for i in range(opts.servers)] + ([killer.run()] if killer else [])
    results = await asyncio.gather(*sessions, return_exceptions=True)
    if killer:
        out["kills"] = killer.report
    for i, r in enumerate(results):
        if isinstance(r, BaseException):
            what = "session" if i < opts.servers else "killer"
            out["errors"].append({"server": i, "tool": what, "args": {}, "kind": "exception",
                                  "text": f"the {what} failed: {type(r).__name__}: {r}"})
    out["elapsed_s"] = round(time.monotonic() - started, 2)
    return out


# ---------------------------------------------------------------------------------------------
# kill


def cli_list():
    """The current view as the CLI sees it now, or the error it gave."""
    try:
        p = subprocess.run([BIN, "--db", DB, "list", "--json", "--subject", SUBJECT],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "MEMSCOPE_ASSERT_INVARIANTS": "1"})
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{type(e).__name__}: {e}"
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {p.stderr.strip()}"
    try:
        return json.loads(p.stdout), None
    except ValueError as e:
        return None, f"not JSON ({e}): {p.stdout[:500]}"


async def kill_mode(opts):
    rng = random.Random(opts.seed)
    writes = [{"predicate": f"kill_{n}", "value": f"k-{n}", "scope": rng.choice(("global", "repo")),
               "source": f"k/m{n}"} for n in range(opts.writes)]
    batches = [writes[i:i + opts.inflight] for i in range(0, len(writes), opts.inflight)]
    kill_batch = len(batches) // 2
    out = {"mode": "kill", "seed": opts.seed, "inflight": opts.inflight, "writes": writes,
           "phase1": {"sent": 0, "acknowledged": [], "errors": [], "unexpected": [], "mismatches": [],
                      "killed": False, "unanswered_at_kill": 0, "answered_in_kill_batch": 0},
           "replay": {"results": [], "errors": [], "mismatches": []}, "stderr": {}}
    p1 = out["phase1"]
    started = time.monotonic()

    srv = Server("k1")
    await srv.__aenter__()
    try:
        p1["pid"] = srv.pid
        for b, batch in enumerate(batches[:kill_batch + 1]):
            p1["sent"] += len(batch)
            if b < kill_batch:
                recs = await asyncio.gather(*(srv.call("remember", w, opts.timeout) for w in batch))
            else:
                # Kill the server while this batch is in flight: as soon as `first` of its calls
                # are answered (seeded), the others still on their way.
                tasks = [asyncio.ensure_future(srv.call("remember", w, 10)) for w in batch]
                first = rng.randrange(0, max(1, len(batch) // 2))
                while sum(t.done() for t in tasks) < first:
                    await asyncio.wait([t for t in tasks if not t.done()],
                                       return_when=asyncio.FIRST_COMPLETED)
                os.kill(srv.pid, signal.SIGKILL)
                p1["killed"] = True
                p1["kill_after_s"] = round(time.monotonic() - started, 3)
                p1["answered_when_killed"] = sum(t.done() for t in tasks)
                recs = await asyncio.gather(*tasks)
            for w, rec in zip(batch, recs):
                if "exception" in rec:
                    if b < kill_batch:
                        p1["errors"].append(error_entry(rec, "before kill"))
                    else:
                        p1["unanswered_at_kill"] += 1
                        p1.setdefault("unanswered_texts", []).append(rec["exception"])
                    continue
                if b == kill_batch:
                    p1["answered_in_kill_batch"] += 1
                if rec.get("is_error"):
                    p1["errors"].append(error_entry(rec, "before kill"))
                    continue
                d = rec["data"] or {}
                if d.get("outcome") not in ACKNOWLEDGED:
                    p1["unexpected"].append({"args": w, "answered": d, "text": rec["text"]})
                    continue
                m = mismatch(rec)
                if m:
                    p1["mismatches"].append(m)
                p1["acknowledged"].append(ack_entry(rec))
    finally:
        await srv.close()
        out["stderr"]["k1"] = srv.stderr_tail()

    # What is on disk now, before anything else touches the database.
    records, err = cli_list()
    out["after_kill_list"] = records
    out["after_kill_list_error"] = err

    async with Server("k2") as srv2:
        out["replay"]["pid"] = srv2.pid
        for batch in batches:
            recs = await asyncio.gather(*(srv2.call("remember", w, opts.timeout) for w in batch))
            for w, rec in zip(batch, recs):
                if is_failure(rec):
                    out["replay"]["errors"].append(error_entry(rec, "replay"))
                    out["replay"]["results"].append({"requested": w, "outcome": "error",
                                                     "text": rec.get("exception") or rec.get("text")})
                    continue
                d = rec["data"] or {}
                m = mismatch(rec)
                if m:
                    out["replay"]["mismatches"].append(m)
                out["replay"]["results"].append({
                    "requested": w, "outcome": d.get("outcome"), "predicate": d.get("predicate"),
                    "scope": d.get("scope"), "value": d.get("value"), "version": d.get("version")})
        out["stderr"]["k2"] = srv2.stderr_tail()
    out["elapsed_s"] = round(time.monotonic() - started, 2)
    return out


# ---------------------------------------------------------------------------------------------


def main():
    global BIN, DB, WORKDIR
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("parallel", "kill"))
    ap.add_argument("bin")
    ap.add_argument("db")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--inflight", type=int, default=None, help="calls in flight (6 parallel, 8 kill)")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--writes", type=int, default=400)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds one call may take")
    ap.add_argument("--kill-backends", action="store_true",
                    help="parallel on PostgreSQL: end the servers' connections, idle and mid-call")
    ap.add_argument("--idle-kills", type=int, default=6, help="idle kills at least (--kill-backends)")
    opts = ap.parse_args()
    if opts.inflight is None:
        opts.inflight = 6 if opts.mode == "parallel" else 8
    if opts.inflight < 1 or opts.servers < 1 or opts.writes < 2:
        ap.error("--inflight and --servers must be at least 1, --writes at least 2")
    BIN = os.path.abspath(opts.bin)
    # A PostgreSQL address is passed as it is (and never logged: it holds a password).
    on_postgres = opts.db.startswith(("postgres://", "postgresql://"))
    DB = opts.db if on_postgres else os.path.abspath(opts.db)
    if opts.kill_backends and (opts.mode != "parallel" or not on_postgres):
        ap.error("--kill-backends is for parallel mode on a PostgreSQL database")
    WORKDIR = tempfile.mkdtemp(prefix="mcp-stress-", dir=None if on_postgres else (os.path.dirname(DB) or None))
    log(f"{opts.mode} seed={opts.seed} bin={BIN} db={'(a PostgreSQL address)' if on_postgres else DB}")
    try:
        out = asyncio.run(parallel(opts) if opts.mode == "parallel" else kill_mode(opts))
    finally:
        reap_all()
    out["servers_left"] = [pid for pid in SPAWNED if _is_our_server(pid) and not _is_zombie(pid)]
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
