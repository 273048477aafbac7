#!/usr/bin/env node
'use strict';
// g-counter and pn-counter workloads. Correct: a state-based PN-counter.
//
// State is two maps, P and N, from a writer id to that writer's running
// total of positive (P) and absolute negative (N) deltas. The node only
// ever raises its own entries; merging takes the max per entry, so
// repeated, lost and reordered gossip is harmless. read = sum(P) - sum(N).
// With only non-negative deltas (g-counter) N stays empty.
//
// The writer id is node id + a per-process boot nonce, so a restarted node
// starts fresh entries instead of counting from 0 under its old entry
// (where max-merge with the peers' copy of the old entry would swallow new
// adds).
//
// Every 100 ms the whole state is sent to every other node (fire-and-forget).
const crypto = require('crypto');
const { Node } = require('./maelstrom');

const node = new Node();
const GOSSIP_INTERVAL_MS = 100;
const BOOT = crypto.randomBytes(6).toString('hex');
const P = {};
const N = {};
let me = null;

node.onInit(() => {
  me = `${node.nodeId}:${BOOT}`;
});

node.on('add', (msg) => {
  const delta = msg.body.delta;
  if (!Number.isSafeInteger(delta)) {
    node.error(msg, 12, 'delta must be an integer');
    return;
  }
  if (delta >= 0) P[me] = (P[me] || 0) + delta;
  else N[me] = (N[me] || 0) - delta;
  node.reply(msg, { type: 'add_ok' });
});

const sum = (m) => Object.values(m).reduce((a, b) => a + b, 0);

node.on('read', (msg) => node.reply(msg, { type: 'read_ok', value: sum(P) - sum(N) }));

function merge(mine, theirs) {
  if (!theirs || typeof theirs !== 'object') return;
  for (const [k, v] of Object.entries(theirs)) {
    if (Number.isSafeInteger(v) && v > (mine[k] || 0)) mine[k] = v;
  }
}

node.on('counter_state', (msg) => {
  merge(P, msg.body.p);
  merge(N, msg.body.n);
});

node.every(GOSSIP_INTERVAL_MS, () => {
  if (Object.keys(P).length === 0 && Object.keys(N).length === 0) return;
  for (const peer of node.otherNodes()) node.send(peer, { type: 'counter_state', p: P, n: N });
});

node.run();
