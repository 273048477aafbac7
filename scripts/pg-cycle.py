#!/usr/bin/python3
"""Replay an Elle cycle of a PostgreSQL run from its statement log.

    scripts/pg-cycle.py replay RUN_DIR [--anomaly G2-item] [--instance 0] [--repeat 3]

RUN_DIR is a run directory of `splitbrain test --target postgres` (it holds test.json,
history.jsonl, results.json and statements.jsonl). The confirmation of a cycle from the
same log is the harness's own (`details.statement_log` of the checker's result, printed
after the verdict and in report.html).

`replay` starts a fresh PostgreSQL (initdb in a temporary directory, as the `postgres`
account when run as root, Unix socket only), creates the rows the cycle's transactions
found before they ran (each key's longest list read by them, less what they appended; no
row where that is empty), and sends the cycle's statements again on one connection per
transaction, in the order they were sent in the run (each next statement waits for the
previous one's answer or 300 ms, when that one is blocked on a lock), except that a
COMMIT waits until after the other transactions' statements that the run shows ran
before it took effect (see replay_order). It prints every answer, marks those that differ
from the run's, and whether each transaction committed; the run's answers again with all
of them committing reproduces the anomaly with nothing else running.

Needs python3-psycopg2 (Debian) and PostgreSQL 15's programs in
/usr/lib/postgresql/15/bin (or PG_BIN).
"""

import argparse
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time

TABLE_SQL = {
    "SELECT v FROM lists WHERE k = $1",
    "UPDATE lists SET v = v || $2::bigint WHERE k = $1",
    "INSERT INTO lists AS l (k, v) VALUES ($1, ARRAY[$2::bigint]) ON CONFLICT (k) DO UPDATE SET v = l.v || $2::bigint",
}
SETUP_PROCESS_BASE = 2_000_000


def load_run(run_dir):
    test = json.load(open(os.path.join(run_dir, "test.json")))
    results = json.load(open(os.path.join(run_dir, "results.json")))
    log = {}
    for line in open(os.path.join(run_dir, "statements.jsonl")):
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if "slot" in v and "seq" in v:
            log[(v["slot"], v["seq"])] = v
    # History index of each completion -> (slot, seq), as the harness matches them.
    concurrency = max(1, int(test.get("concurrency", 1)))
    next_seq, pending, slots = {}, {}, {}
    for pos, line in enumerate(open(os.path.join(run_dir, "history.jsonl"))):
        op = json.loads(line)
        p = op.get("process")
        if not isinstance(p, int) or p >= SETUP_PROCESS_BASE:
            continue
        slot = p % concurrency
        if op["type"] == "invoke":
            seq = next_seq.get(slot, 0)
            pending[p] = (slot, seq)
            next_seq[slot] = seq + 1
        elif p in pending:
            slots[op.get("index", pos)] = pending.pop(p)
    return test, results, log, slots


def find_cycle(results, anomaly, instance):
    for r in results.get("results", []):
        a = r.get("details", {}).get("anomalies", {}).get(anomaly)
        if a and len(a.get("instances", [])) > instance:
            return r["checker"], a["instances"][instance]
    return None, None


def statements_of(line):
    return line.get("statements", []) if line else []


def rows_list(st):
    """The list a SELECT of lists answered: None for no row."""
    rows = st["result"].get("rows") if isinstance(st["result"], dict) else None
    if rows is None:
        return "error"
    return rows[0] if rows else None


def pg_bin(name):
    return os.path.join(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"), name)


class Server:
    """A throwaway PostgreSQL on a Unix socket in a temporary directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="splitbrain-replay-")
        self.user = None
        if os.geteuid() == 0:
            self.user = pwd.getpwnam("postgres")
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self.data = os.path.join(self.dir, "data")
        self.run([pg_bin("initdb"), "-D", self.data, "-U", "splitbrain", "--auth=trust", "--no-locale", "-N"])
        self.proc = subprocess.Popen(self.cmd([pg_bin("postgres"), "-D", self.data, "-k", self.dir,
                                               "-c", "listen_addresses=", "-c", "fsync=off",
                                               "-c", "deadlock_timeout=100ms"]),
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "log"), "w"))
        for _ in range(100):
            if os.path.exists(os.path.join(self.dir, ".s.PGSQL.5432")):
                break
            time.sleep(0.1)
        time.sleep(0.3)

    def cmd(self, argv):
        return (["runuser", "-u", "postgres", "--"] + argv) if self.user else argv

    def run(self, argv):
        subprocess.run(self.cmd(argv), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def connect(self):
        import psycopg2
        c = psycopg2.connect(host=self.dir, user="splitbrain", dbname="postgres")
        c.autocommit = True  # the replayed BEGIN / COMMIT are sent as they were
        return c

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def run_answer(st):
    """The run's answer to a statement, as psycopg2 reports it (None: not compared)."""
    r = st["result"]
    if st["sql"].startswith("SELECT v FROM lists") and isinstance(r, dict) and "rows" in r:
        return [(row,) for row in r["rows"]]
    if isinstance(r, dict) and "rows_affected" in r:
        verb = st["sql"].split()[0]
        return f"INSERT 0 {r['rows_affected']}" if verb == "INSERT" else f"{verb} {r['rows_affected']}"
    return None


def literal_sql(sql, params):
    for i in range(len(params), 0, -1):
        sql = sql.replace(f"${i}", str(int(params[i - 1])))
    return sql


def initial_state(lines):
    """Each key the cycle read: its longest list read less what the cycle appended."""
    appended = set()
    for line in lines.values():
        for st in statements_of(line):
            if st["sql"] in TABLE_SQL and not st["sql"].startswith("SELECT"):
                appended.add((st["params"][0], st["params"][1]))
    state = {}
    for line in lines.values():
        for st in statements_of(line):
            if st["sql"].startswith("SELECT v FROM lists"):
                k = st["params"][0]
                l = rows_list(st)
                if l == "error":
                    continue
                before = [x for x in (l or []) if (k, x) not in appended]
                if len(before) >= len(state.get(k) or []):
                    state[k] = before
    return state


def replay_once(lines, names, order):
    server = Server()
    try:
        setup = server.connect()
        cur = setup.cursor()
        cur.execute("CREATE TABLE lists (k bigint PRIMARY KEY, v bigint[] NOT NULL)")
        state = initial_state(lines)
        for k, l in sorted(state.items()):
            if l:
                cur.execute("INSERT INTO lists VALUES (%s, %s)", (k, l))
        print("  initial rows: " + ", ".join(f"{k}={l if l else 'no row'}" for k, l in sorted(state.items())))
        conns = {t: server.connect() for t in names}
        for t, c in conns.items():
            c.cursor().execute("SELECT pg_backend_pid()")
        aborted = {t: None for t in names}
        differs = []
        for t, st in order:
            if aborted[t]:
                continue
            sql = literal_sql(st["sql"], st["params"])
            out = {}

            def send(c=conns[t], sql=sql, out=out):
                try:
                    cur = c.cursor()
                    cur.execute(sql)
                    out["answer"] = cur.fetchall() if cur.description else f"{cur.statusmessage}"
                except Exception as e:  # noqa: BLE001 (the server's answer is the result)
                    out["answer"] = f"ERROR {getattr(e, 'pgcode', '')}: {str(e).strip().splitlines()[0]}"
            th = threading.Thread(target=send, daemon=True)
            th.start()
            th.join(0.3)
            if th.is_alive():
                print(f"    T{t}: {sql}  ... waits (lock); going on")
                # Give the blocked statement the rest when the others have run.
                th.join(10)
            answer = out.get("answer", "no answer within 10 s")
            same = "" if run_answer(st) is None or run_answer(st) == answer else f"   (in the run: {run_answer(st)})"
            if same:
                differs.append(t)
            print(f"    T{t}: {sql}  -> {answer}{same}")
            if isinstance(answer, str) and answer.startswith("ERROR"):
                aborted[t] = answer
                conns[t].cursor().execute("ROLLBACK")
        print("  outcome: " + ", ".join(f"T{t} {'aborted (' + aborted[t] + ')' if aborted[t] else 'committed'}"
                                        for t in names))
        if differs:
            print("  some answers differ from the run's: not the run's interleaving")
        return not differs and all(v is None for v in aborted.values())
    finally:
        server.stop()


def replay(args):
    test, results, log, slots = load_run(args.run_dir)
    checker, cyc = find_cycle(results, args.anomaly, args.instance)
    if cyc is None:
        print(f"no {args.anomaly} instance {args.instance} in results.json")
        return 2
    names = [s["from"] for s in cyc["steps"]]
    lines = {t: log.get(tuple(slots.get(t, (None, None)))) for t in names}
    if any(l is None for l in lines.values()):
        print("a transaction of the cycle is not in the statement log")
        return 2
    order = replay_order(lines)
    reproduced = 0
    for i in range(args.repeat):
        print(f"replay {i + 1} of {args.anomaly} cycle " + " -> ".join(f"T{t}" for t in names))
        reproduced += replay_once(lines, names, order)
    print(f"the run's answers again and all {len(names)} committed in {reproduced} of {args.repeat} replays")
    return 0 if reproduced else 1


def snapshot_sent(line):
    sts = [st for st in statements_of(line) if not st["sql"].startswith("BEGIN")]
    return sts[0]["sent_us"] if sts else float("inf")


def replay_order(lines):
    """The cycle's statements in the order they were sent, except that a COMMIT comes after
    every SELECT of another transaction of the cycle that was answered without the
    committing transaction's appends (a key it appended to, without its value) and whose
    snapshot was taken before the COMMIT was answered: after that SELECT when it too was
    sent before the answer, else after the snapshot (its transaction's first statement).
    In the run that commit took effect after those, while its answer was on its way."""
    stmts = [(st["sent_us"], t, st) for t, l in lines.items() for st in statements_of(l)
             if st["sql"] in TABLE_SQL or st["sql"].startswith("BEGIN") or st["sql"] == "COMMIT"]
    placed = []
    for sent, t, st in stmts:
        at = sent
        if st["sql"] == "COMMIT":
            wrote = {(w["params"][0], w["params"][1]) for w in statements_of(lines[t])
                     if w["sql"] in TABLE_SQL and not w["sql"].startswith("SELECT")}
            for sent2, t2, st2 in stmts:
                # The other transaction's snapshot: taken at its first statement after BEGIN.
                snap = snapshot_sent(lines[t2])
                if t2 == t or not st2["sql"].startswith("SELECT") or snap >= st["done_us"]:
                    continue
                k = st2["params"][0]
                got = rows_list(st2)
                if got == "error":
                    continue
                if any(k == wk and (got is None or wv not in got) for wk, wv in wrote):
                    # After the read when it was sent before the answer, else after the
                    # snapshot that made it miss the write.
                    at = max(at, (sent2 if sent2 < st["done_us"] else snap) + 0.5)
        placed.append((at, t, st))
    placed.sort(key=lambda x: x[0])
    return [(t, st) for _, t, st in placed]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["replay"])
    p.add_argument("run_dir")
    p.add_argument("--anomaly", default="G2-item")
    p.add_argument("--instance", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    sys.exit(replay(a))


if __name__ == "__main__":
    main()
