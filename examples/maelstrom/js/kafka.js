#!/usr/bin/env node
'use strict';
// kafka workload. Correct: single leader.
//
// The leader is the first of node_ids (n0). It holds every log (an array
// per key: a message's offset is its index, so offsets are dense from 0)
// and the committed offset of every key, and serves send, poll,
// commit_offsets and list_committed_offsets itself, one message at a time:
// offsets are handed out once, a poll sees every message acknowledged
// before it, and a committed offset only moves up. Every other node
// forwards each client request to the leader and relays the answer; no
// answer within 1 s gives error 0 (timeout, indefinite: the send may
// still land).
//
// Limits: in memory only, so killing the leader loses the logs (run it
// under partition / pause / loss, not kill).
const { Node } = require('./maelstrom');

const node = new Node();
const FORWARD_TIMEOUT_MS = 1000;
const POLL_LIMIT = 100; // messages per key per poll; the consumer polls again for more
const logs = new Map(); // key -> [msg, ...]
const committed = new Map(); // key -> highest committed offset

function apply(msg) {
  const b = msg.body;
  if (b.type === 'send') {
    if (!logs.has(b.key)) logs.set(b.key, []);
    const log = logs.get(b.key);
    log.push(b.msg);
    node.reply(msg, { type: 'send_ok', offset: log.length - 1 });
  } else if (b.type === 'poll') {
    const out = {};
    for (const [key, from] of Object.entries(b.offsets || {})) {
      const log = logs.get(key) || [];
      const start = Math.max(0, from | 0);
      const entries = [];
      for (let o = start; o < Math.min(log.length, start + POLL_LIMIT); o++) entries.push([o, log[o]]);
      if (entries.length) out[key] = entries;
    }
    node.reply(msg, { type: 'poll_ok', msgs: out });
  } else if (b.type === 'commit_offsets') {
    for (const [key, o] of Object.entries(b.offsets || {})) {
      committed.set(key, Math.max(committed.has(key) ? committed.get(key) : -1, o | 0));
    }
    node.reply(msg, { type: 'commit_offsets_ok' });
  } else {
    const out = {};
    for (const key of b.keys || []) if (committed.has(key)) out[key] = committed.get(key);
    node.reply(msg, { type: 'list_committed_offsets_ok', offsets: out });
  }
}

function handle(msg) {
  const leader = node.nodeIds[0];
  if (node.nodeId === leader) apply(msg);
  else node.forward(msg, leader, FORWARD_TIMEOUT_MS);
}

for (const t of ['send', 'poll', 'commit_offsets', 'list_committed_offsets']) node.on(t, handle);
node.run();
