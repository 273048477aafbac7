#!/usr/bin/env python3
"""The table of docs/guided.md from guided-measure.py's JSON lines.

Usage: guided-table.py OUT.jsonl [MORE.jsonl ...]
Time to detect: the online check's first_known_at_s (earliest checker) of a run whose
expectation was met, else its ttd_evidence_s. Bug cells (both searches): detected,
median (range), ratio random/guided, and the guided runs split by whether they started
from a memory (warm) or cold. Correct-mode cells (named `*/correct*`, `*-checked-as-rc`)
and cells run under one search only: verdicts, false positives, coverage."""
import json, statistics, sys

rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
cells = []
for r in rows:
    if r['cell'] not in cells:
        cells.append(r['cell'])


def ttd(r):
    if not r.get('met') or r.get('verdict') != 'invalid':
        return None
    fk = r.get('first_known_at_s') or {}
    return min(fk.values()) if fk else r.get('ttd_evidence_s')


def fmt(d):
    return f"{statistics.median(d):.1f} ({min(d):.1f}–{max(d):.1f})" if d else '–'


def warm(r):
    m = r.get('memory') or {}
    return (m.get('runs') or 0) > 0


def med(xs):
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):g}" if xs else '–'


print('| cell | seeds | random: detected | guided: detected | random: median s (range) '
      '| guided: median s (range) | ratio | guided cold / warm: median s | states r/g | pairs r/g |')
print('|---|---|---|---|---|---|---|---|---|---|')
correct = []
for c in cells:
    by = {s: [r for r in rows if r['cell'] == c and r['search'] == s] for s in ['random', 'guided']}
    # full.toml's cells expected valid: their names say so
    if '/correct' in c or c.endswith('-checked-as-rc') or not by['random'] or not by['guided']:
        correct.append(c)
        continue
    out = {}
    for s, rs in by.items():
        det = [t for t in map(ttd, rs) if t is not None]
        out[s] = (len(det), len(rs), det)
    rm = statistics.median(out['random'][2]) if out['random'][2] else None
    gm = statistics.median(out['guided'][2]) if out['guided'][2] else None
    ratio = f"{rm / gm:.2f}×" if rm and gm else '–'
    seeds = sorted({r['seed'] for r in by['random'] + by['guided']})
    cold = [t for t in (ttd(r) for r in by['guided'] if not warm(r)) if t is not None]
    hot = [t for t in (ttd(r) for r in by['guided'] if warm(r)) if t is not None]
    ncold = sum(1 for r in by['guided'] if not warm(r))
    nhot = sum(1 for r in by['guided'] if warm(r))
    split = f"{med(cold)} ({len(cold)}/{ncold}) / {med(hot)} ({len(hot)}/{nhot})"
    print(f"| {c} | {seeds[0]}–{seeds[-1]} | {out['random'][0]}/{out['random'][1]} "
          f"| {out['guided'][0]}/{out['guided'][1]} | {fmt(out['random'][2])} "
          f"| {fmt(out['guided'][2])} | {ratio} | {split} "
          f"| {med([r.get('states') for r in by['random']])} / {med([r.get('states') for r in by['guided']])} "
          f"| {med([r.get('pairs') for r in by['random']])} / {med([r.get('pairs') for r in by['guided']])} |")
if correct:
    print()
    print('| correct cell | search | seeds | valid | invalid (false positives) | other | states (median) | pairs (median) |')
    print('|---|---|---|---|---|---|---|---|')
    for c in correct:
        for s in ['guided', 'random']:
            rs = [r for r in rows if r['cell'] == c and r['search'] == s]
            if not rs:
                continue
            seeds = sorted(r['seed'] for r in rs)
            v = sum(1 for r in rs if r.get('verdict') == 'valid')
            bad = sum(1 for r in rs if r.get('verdict') == 'invalid')
            print(f"| {c} | {s} | {seeds[0]}–{seeds[-1]} | {v}/{len(rs)} | {bad} | {len(rs) - v - bad} "
                  f"| {med([r.get('states') for r in rs])} | {med([r.get('pairs') for r in rs])} |")
loads = [float(r['load'][0]) for r in rows]
utc = sorted(r['utc'] for r in rows if r.get('utc'))
span = f"{utc[0]}–{utc[-1]} UTC; " if utc else ''
print(f"\n{span}load (1 min) at run starts: {min(loads):.1f}–{max(loads):.1f}, "
      f"median {statistics.median(loads):.1f}; runs: {len(rows)}")
