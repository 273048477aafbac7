#!/usr/bin/python3
"""Tests, against a fresh PostgreSQL, the hypothesis of
docs/findings/postgres-serializable-g2-item.md: a pivot that finishes committing while
the transaction it has a rw-conflict out to (T_out) has committed but not yet finished
its commit processing loses that conflict, so a later reader of the pivot's write is
not refused.

    /usr/bin/python3 scripts/pg-ssi-commit-race.py [--no-hold]

Three serializable transactions on rows 1 and 2 (both [0]):

  1. T_out: UPDATE row 1 (append 1).
  2. P:     SELECT row 1 -> [0]          (P -rw-> T_out: P misses T_out's write)
  3. T_out: COMMIT, held by gdb at the entry of ReleasePredicateLocks (the end of its
            commit processing; with --no-hold it runs through)
  4. T_in:  SELECT row 1                 (sees T_out's append: T_out -wr-> T_in)
  5. P:     UPDATE row 2 (append 2); COMMIT
  6. T_out: released
  7. T_in:  SELECT row 2 -> [0]          (T_in -rw-> P: T_in misses P's write); COMMIT

If all three commit with those answers, the history is a G2-item cycle T_in -> P ->
T_out -> T_in that no serial order explains. Needs gdb, python3-psycopg2 and root (to
attach to the server's backend).
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("pg_cycle", os.path.join(here, "pg-cycle.py"))
pg_cycle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pg_cycle)


def q(conn, name, sql):
    """Runs `sql` on `conn`, printing and returning its answer (an error as text)."""
    try:
        cur = conn.cursor()
        cur.execute(sql)
        answer = cur.fetchall() if cur.description else cur.statusmessage
    except Exception as e:  # noqa: BLE001 (the server's answer is the result)
        answer = f"ERROR {getattr(e, 'pgcode', '')}: {str(e).strip().splitlines()[0]}"
        conn.cursor().execute("ROLLBACK")
    print(f"  {name}: {sql}  -> {answer}", flush=True)
    return answer


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--no-hold", action="store_true", help="let T_out's COMMIT run through (the control)")
    a = p.parse_args()
    server = pg_cycle.Server()
    gdb = None
    out = []
    try:
        setup = server.connect()
        setup.cursor().execute("CREATE TABLE lists (k bigint PRIMARY KEY, v bigint[] NOT NULL)")
        setup.cursor().execute("INSERT INTO lists VALUES (1, '{0}'), (2, '{0}')")
        tout, piv, tin = server.connect(), server.connect(), server.connect()
        cur = tout.cursor()
        cur.execute("SELECT pg_backend_pid()")
        tout_pid = cur.fetchone()[0]
        begin = "BEGIN ISOLATION LEVEL SERIALIZABLE"
        q(tout, "T_out", begin)
        q(tout, "T_out", "UPDATE lists SET v = v || 1::bigint WHERE k = 1")
        q(piv, "P    ", begin)
        q(piv, "P    ", "SELECT v FROM lists WHERE k = 1")
        if not a.no_hold:
            gdb = subprocess.Popen(["gdb", "-q", "-p", str(tout_pid), "-batch",
                                    "-ex", "set pagination off",
                                    "-ex", "break ReleasePredicateLocks",
                                    "-ex", "continue",
                                    "-ex", "shell touch " + os.path.join(server.dir, "held"),
                                    "-ex", "shell while [ ! -e " + os.path.join(server.dir, "release") + " ]; do sleep 0.05; done",
                                    "-ex", "detach"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            # Wait until gdb has attached, set the breakpoint and let the backend run on.
            threading.Thread(target=lambda: out.extend(gdb.stdout), daemon=True).start()
            for _ in range(600):
                if any("Continuing" in l for l in out):
                    break
                time.sleep(0.05)
            print("  (gdb: " + " | ".join(l.strip() for l in out if l.strip())[:300] + ")", flush=True)
        done = {}
        th = threading.Thread(target=lambda: done.update(a=q(tout, "T_out", "COMMIT")), daemon=True)
        th.start()
        if gdb:
            for _ in range(200):
                if os.path.exists(os.path.join(server.dir, "held")):
                    break
                time.sleep(0.05)
            print("  (T_out's backend held at ReleasePredicateLocks)" if os.path.exists(os.path.join(server.dir, "held"))
                  else "  (gdb did not stop T_out)", flush=True)
        else:
            th.join(10)
        q(tin, "T_in ", begin)
        first = q(tin, "T_in ", "SELECT v FROM lists WHERE k = 1")
        q(piv, "P    ", "UPDATE lists SET v = v || 2::bigint WHERE k = 2")
        pc = q(piv, "P    ", "COMMIT")
        if gdb:
            open(os.path.join(server.dir, "release"), "w").close()
        th.join(30)
        if gdb:
            try:
                gdb.wait(10)
            except subprocess.TimeoutExpired:
                pass
            hit = [l.strip() for l in out if l.startswith("Breakpoint 1,")]
            print("  (gdb: " + (hit[0] if hit else "no breakpoint hit") + ")", flush=True)
        second = q(tin, "T_in ", "SELECT v FROM lists WHERE k = 2")
        ic = q(tin, "T_in ", "COMMIT")
        cycle = (done.get("a") == "COMMIT" and pc == "COMMIT" and ic == "COMMIT"
                 and first == [([0, 1],)] and second == [([0],)])
        print("G2-item committed: T_in -rw-> P -rw-> T_out -wr-> T_in, all three committed" if cycle
              else "no anomaly: " + ("a transaction was refused" if "ERROR" in f"{done.get('a')}{pc}{ic}{second}" else "other answers"))
        return 0 if cycle else 1
    finally:
        if gdb and gdb.poll() is None:
            open(os.path.join(server.dir, "release"), "w").close()
            try:
                gdb.wait(10)
            except subprocess.TimeoutExpired:
                gdb.kill()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
