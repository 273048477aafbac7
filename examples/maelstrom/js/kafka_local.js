#!/usr/bin/env node
'use strict';
// kafka workload. Bug: offsets assigned locally per node.
//
// Every node keeps its own copy of every log (offset -> msg per key) and
// answers every request itself. A send takes the next offset after the
// highest this node knows of, is acknowledged at once, and is pushed to
// every peer (and the whole state again every 200 ms, until the peers have
// it). A peer keeps the first message it learns at an offset.
//
// Two nodes that take a send for the same key before hearing of each
// other's hand out the same offset to two messages: any concurrency does it
// a little, a partition does it for as long as it lasts. Afterwards one of
// the two messages is gone from every log but its sender's (lost write),
// and polls disagree about what an offset holds (inconsistent offsets).
// Committed offsets are local too (max per node, gossiped).
const { Node } = require('./maelstrom');

const node = new Node();
const logs = new Map(); // key -> Map(offset -> msg)
const committed = new Map(); // key -> highest committed offset this node knows

function logOf(key) {
  if (!logs.has(key)) logs.set(key, new Map());
  return logs.get(key);
}

function learn(key, offset, msg) {
  const log = logOf(key);
  if (!log.has(offset)) log.set(offset, msg);
}

function raise(key, o) {
  committed.set(key, Math.max(committed.has(key) ? committed.get(key) : -1, o | 0));
}

function state() {
  const out = {};
  for (const [k, log] of logs) out[k] = [...log.entries()];
  return { logs: out, committed: Object.fromEntries(committed) };
}

node.on('send', (msg) => {
  const { key, msg: m } = msg.body;
  const log = logOf(key);
  let offset = -1;
  for (const o of log.keys()) offset = Math.max(offset, o);
  offset += 1;
  log.set(offset, m);
  node.reply(msg, { type: 'send_ok', offset });
  for (const peer of node.otherNodes()) {
    node.send(peer, { type: 'replicate', logs: { [key]: [[offset, m]] }, committed: {} });
  }
});

node.on('replicate', (msg) => {
  for (const [key, entries] of Object.entries(msg.body.logs || {})) {
    for (const [o, m] of entries) learn(key, o | 0, m);
  }
  for (const [key, o] of Object.entries(msg.body.committed || {})) raise(key, o);
});

node.every(200, () => {
  if (logs.size === 0 && committed.size === 0) return;
  const s = state();
  for (const peer of node.otherNodes()) node.send(peer, Object.assign({ type: 'replicate' }, s));
});

node.on('poll', (msg) => {
  const out = {};
  for (const [key, from] of Object.entries(msg.body.offsets || {})) {
    const log = logs.get(key) || new Map();
    const later = [...log.keys()].filter((o) => o >= (from | 0)).sort((a, b) => a - b);
    const entries = [];
    // Contiguous from the first offset at or after `from`.
    for (const o of later) {
      if (entries.length && o !== entries[entries.length - 1][0] + 1) break;
      entries.push([o, log.get(o)]);
    }
    if (entries.length) out[key] = entries;
  }
  node.reply(msg, { type: 'poll_ok', msgs: out });
});

node.on('commit_offsets', (msg) => {
  for (const [key, o] of Object.entries(msg.body.offsets || {})) raise(key, o);
  node.reply(msg, { type: 'commit_offsets_ok' });
});

node.on('list_committed_offsets', (msg) => {
  const out = {};
  for (const key of msg.body.keys || []) if (committed.has(key)) out[key] = committed.get(key);
  node.reply(msg, { type: 'list_committed_offsets_ok', offsets: out });
});

node.run();
