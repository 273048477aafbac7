#!/usr/bin/env python3
"""Fuzzes the whole `splitbrain check` path (readers, pairing, every checker) with files
made by mutating small well-formed histories of each supported format.

Counts, over a bounded number of seconds: crashes (a panic's exit 101, a signal, a hang
past the per-file timeout, any exit code DESIGN.md does not define) and `valid` verdicts
(exit 0) on inputs that cannot hold a completed op (no `ok` token anywhere in the file).
Both must be 0. Seeded: the same --seed makes the same files. Each failing input is kept
in --keep-dir.

    scripts/fuzz-check.py --binary target/release/splitbrain --seconds 600 --seed 1
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time


def jsonl(ops):
    return "".join(json.dumps(o) + "\n" for o in ops)


def register_history(rng):
    ops, t = [], 0
    for i in range(rng.randint(1, 6)):
        p = rng.randint(0, 3)
        f = rng.choice(["read", "write", "cas"])
        v = {"read": None, "write": rng.randint(0, 3), "cas": [rng.randint(0, 3), rng.randint(0, 3)]}[f]
        t += 1
        ops.append({"index": len(ops), "time": t, "process": p, "type": "invoke", "f": f, "value": v})
        t += 1
        done = rng.choice(["ok", "ok", "fail", "info"])
        ops.append({"index": len(ops), "time": t, "process": p, "type": done, "f": f,
                    "value": rng.randint(0, 3) if f == "read" else v})
    return jsonl(ops)


def append_history(rng):
    ops, t = [], 0
    for i in range(rng.randint(1, 5)):
        p = i
        txn = [["append", rng.randint(0, 2), i + 1], ["r", rng.randint(0, 2), None]]
        t += 1
        ops.append({"index": len(ops), "time": t, "process": p, "type": "invoke", "f": "txn", "value": txn})
        t += 1
        done = [["append", txn[0][1], i + 1], ["r", txn[1][1], list(range(1, rng.randint(1, i + 2)))]]
        ops.append({"index": len(ops), "time": t, "process": p, "type": rng.choice(["ok", "info"]), "f": "txn", "value": done})
    return jsonl(ops)


def edn_history(rng):
    lines = []
    for i in range(rng.randint(1, 4)):
        v = rng.randint(0, 3)
        lines.append(f"{{:process {i}, :type :invoke, :f :write, :value {v}}}")
        lines.append(f"{{:process {i}, :type :{rng.choice(['ok', 'info', 'fail'])}, :f :write, :value {v}}}")
    return "[" + "\n ".join(lines) + "]\n"


def jepsen_log_history(rng):
    lines = []
    for i in range(rng.randint(1, 4)):
        lines.append(f"INFO  jepsen.util - {i}\t:invoke\t:read\tnil")
        lines.append(f"INFO  jepsen.util - {i}\t:{rng.choice(['ok', 'fail', 'info'])}\t:read\t{rng.randint(0, 3)}")
    return "\n".join(lines) + "\n"


def counter_history(rng):
    ops, t = [], 0
    for i in range(rng.randint(1, 4)):
        f = rng.choice(["add", "read"])
        t += 1
        ops.append({"index": len(ops), "time": t, "process": i, "type": "invoke", "f": f, "value": 1 if f == "add" else None})
        t += 1
        ops.append({"index": len(ops), "time": t, "process": i, "type": rng.choice(["ok", "info"]), "f": f, "value": 1 if f == "add" else rng.randint(0, 5)})
    return jsonl(ops)


GENERATORS = [register_history, append_history, edn_history, jepsen_log_history, counter_history]
FLAGS = [[], ["--workload", "list-append"], ["--workload", "register"], ["--model", "cas-register"],
         ["--checker", "counter"], ["--checker", "kafka"], ["--checker", "unique-ids"],
         ["--checker", "total-queue"], ["--checker", "long-fork"], ["--checker", "lost-appends"]]
GARBAGE = [b"", b"\x00", b"\xff\xfe", b"{", b"}", b"[", b"]", b"nil", b":ok", b"\"ok\"", b"\n",
           b"null", b"-1", b"1e999", b"\"process\":", b"{:type :ok}", "é".encode()]


def mutate(rng, data: bytes) -> bytes:
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(7)
        if kind == 0 and data:  # flip a byte
            i = rng.randrange(len(data))
            data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
        elif kind == 1 and data:  # truncate
            data = data[:rng.randrange(len(data))]
        elif kind == 2:  # insert a token
            i = rng.randrange(len(data) + 1)
            data = data[:i] + rng.choice(GARBAGE) + data[i:]
        elif kind in (3, 4):  # drop, duplicate or swap lines
            lines = data.split(b"\n")
            if len(lines) > 1:
                i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
                if kind == 3:
                    del lines[i]
                else:
                    lines[i], lines[j] = lines[j], lines[i]
                    lines.insert(i, lines[j])
            data = b"\n".join(lines)
        elif kind == 5:  # turn completions into unknowns
            data = data.replace(b'"ok"', b'"info"').replace(b":ok", b":info")
        else:  # leave as is
            pass
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/release/splitbrain")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60, help="per file, seconds")
    ap.add_argument("--keep-dir", default=None)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    keep = a.keep_dir or tempfile.mkdtemp(prefix="sb-fuzz-keep-")
    os.makedirs(keep, exist_ok=True)
    work = tempfile.mkdtemp(prefix="sb-fuzz-")
    path = os.path.join(work, "h")
    runs = crashes = hollow_valid = 0
    codes = {}
    end = time.monotonic() + a.seconds
    print(f"fuzz-check: seed {a.seed}, {a.seconds:.0f} s, binary {a.binary}", flush=True)
    while time.monotonic() < end:
        data = rng.choice(GENERATORS)(rng).encode()
        if rng.random() < 0.9:
            data = mutate(rng, data)
        flags = rng.choice(FLAGS)
        with open(path, "wb") as f:
            f.write(data)
        try:
            p = subprocess.run([a.binary, "check", path, *flags], capture_output=True, timeout=a.timeout)
            code = p.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
        runs += 1
        codes[code] = codes.get(code, 0) + 1
        bad = None
        if code not in (0, 1, 2, 3, 4):
            crashes += 1
            bad = "crash"
        elif code == 0 and b"ok" not in data:
            hollow_valid += 1
            bad = "valid-without-ok"
        if bad:
            name = os.path.join(keep, f"{bad}-{runs}")
            with open(name, "wb") as f:
                f.write(data)
            with open(name + ".flags", "w") as f:
                f.write(" ".join(flags) + f"\nexit {code}\n")
            print(f"  {bad}: {name} ({' '.join(flags)}) exit {code}", flush=True)
    shown = ", ".join(f"exit {k}: {v}" for k, v in sorted(codes.items(), key=str))
    print(f"fuzz-check: {runs} files in {a.seconds:.0f} s; {crashes} crashes; "
          f"{hollow_valid} valid verdicts on inputs without an ok op; {shown}")
    return 1 if crashes or hollow_valid else 0


if __name__ == "__main__":
    sys.exit(main())
