#!/usr/bin/env python3
"""Random vs guided: for seed in SEEDS, for cell in CELLS, for search in (random, guided):
one `splitbrain suite suites/full.toml --only CELL --seeds SEED --time-limit T` run.
Appends one JSON line per run to OUT (so partial results count).

Usage: guided-measure.py BIN OUT.jsonl T SEEDS CELLS [SEARCHES]
SEARCHES: comma list, default `random,guided` (alternated by seed); `guided` alone for
the correct-mode false-positive runs. Seeds run in order, so a cell's guided runs build
on the memory the earlier ones left in STORE (results.json `fault_search.memory`, kept
in each line as `memory`). SUITE (environment) names another suite file than
suites/full.toml (e.g. suites/redis.toml); STORE the run store."""
import json, os, subprocess, sys, time
BIN = sys.argv[1]; OUT = sys.argv[2]; T = sys.argv[3]
SEEDS = [int(s) for s in sys.argv[4].split(',')]
CELLS = sys.argv[5].split(',')
SEARCHES = sys.argv[6].split(',') if len(sys.argv) > 6 else ['random', 'guided']
STORE = os.environ.get("STORE", "/tmp/guided39b/store")
SUITE = os.environ.get("SUITE", "suites/full.toml")
os.makedirs(STORE, exist_ok=True)
for seed in SEEDS:
    for cell in CELLS:
        for search in SEARCHES if seed % 2 else SEARCHES[::-1]:
            js = os.path.join(STORE, f'suite-{cell.replace("/", "_")}-{seed}-{search}.json')
            load = open('/proc/loadavg').read().split()[:3]
            t0 = time.time()
            p = subprocess.run([BIN, 'suite', SUITE, '--only', cell, '--seeds', str(seed),
                                '--time-limit', T, '--nemesis-search', search, '--store', STORE,
                                '--json', js], cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), capture_output=True, text=True)
            row = {'cell': cell, 'seed': seed, 'search': search, 'exit': p.returncode,
                   'wall_s': round(time.time() - t0, 1), 'load': load,
                   'utc': time.strftime('%H:%M:%S', time.gmtime(t0))}
            try:
                rep = json.load(open(js))
                run = rep['cells'][0]['runs'][0]
                row['met'] = run['met']; row['verdict'] = run['verdict']; row['found'] = run['found']
                row['ttd_evidence_s'] = run.get('time_to_detect_s')
                res = json.load(open(os.path.join(run['run_dir'], 'results.json')))
                row['first_known_at_s'] = res.get('first_known_at_s', {})
                row['stopped_early'] = res.get('stopped_early')
                fs = res.get('fault_search') or {}
                row['states'] = fs.get('states'); row['pairs'] = fs.get('pairs')
                row['leader_changes'] = fs.get('leader_changes'); row['signals'] = fs.get('signals')
                row['memory'] = fs.get('memory')
                row['nemesis_events'] = res['stats'].get('nemesis_events')
                row['run_dir'] = run['run_dir']
            except Exception as e:
                row['error'] = repr(e); row['stderr'] = p.stderr[-500:]
            with open(OUT, 'a') as f:
                f.write(json.dumps(row) + '\n')
            print(json.dumps(row), flush=True)
