#!/usr/bin/env node
'use strict';
// lin-kv workload. BUG "reads locally".
//
// Writes and cas go to the leader (n0, the first of node_ids) exactly as in
// lin_kv.js. The leader pushes every change to the followers
// fire-and-forget (plus a full copy every 500 ms); each follower keeps a
// local copy (newest version per key wins). READS ARE ANSWERED FROM THE
// LOCAL COPY of whichever node gets them, so a follower that has not yet
// seen a change (replication delay, dropped push, or a partition between it
// and the leader) returns a value that was already overwritten, or error 20
// for a key that already exists. Not linearizable; it converges once
// replication catches up, so only reads racing writes or a partition show
// the bug.
const { Node, keyOf } = require('./maelstrom');

const node = new Node();
const FORWARD_TIMEOUT_MS = 1000;
const FULL_PUSH_INTERVAL_MS = 500;
const store = new Map(); // canonical key -> [version, key, value]
let version = 0; // leader's change counter

const leader = () => node.nodeIds[0];

function push(entries) {
  for (const peer of node.otherNodes()) node.send(peer, { type: 'replicate', entries });
}

function setValue(key, value) {
  version += 1;
  const entry = [version, key, value];
  store.set(keyOf(key), entry);
  push([entry]);
}

node.on('read', (msg) => {
  const k = keyOf(msg.body.key);
  // BUG: a follower's local copy may be stale.
  if (!store.has(k)) node.error(msg, 20, 'key does not exist');
  else node.reply(msg, { type: 'read_ok', value: store.get(k)[2] });
});

function update(msg) {
  if (node.nodeId !== leader()) {
    node.forward(msg, leader(), FORWARD_TIMEOUT_MS);
    return;
  }
  const b = msg.body;
  const k = keyOf(b.key);
  if (b.type === 'write') {
    setValue(b.key, b.value);
    node.reply(msg, { type: 'write_ok' });
    return;
  }
  if (!store.has(k)) {
    if (b.create_if_not_exists) {
      setValue(b.key, b.to);
      node.reply(msg, { type: 'cas_ok' });
    } else {
      node.error(msg, 20, 'key does not exist');
    }
  } else if (keyOf(store.get(k)[2]) !== keyOf(b.from)) {
    node.error(msg, 22, `expected ${JSON.stringify(b.from)}, had ${JSON.stringify(store.get(k)[2])}`);
  } else {
    setValue(b.key, b.to);
    node.reply(msg, { type: 'cas_ok' });
  }
}

node.on('write', update);
node.on('cas', update);

// A follower applies what it is sent only after REPLICATION_LAG_MS, so a read on a
// follower just after a write returns the old value on an idle machine as on a loaded
// one: the race the bug needs is made on purpose, not left to scheduling.
const REPLICATION_LAG_MS = 300;
node.on('replicate', (msg) => {
  if (node.nodeId === leader()) return;
  const entries = Array.isArray(msg.body.entries) ? msg.body.entries : [];
  setTimeout(() => {
    for (const entry of entries) {
      const [ver, key] = entry;
      const k = keyOf(key);
      if (!store.has(k) || store.get(k)[0] < ver) store.set(k, entry.slice());
    }
  }, REPLICATION_LAG_MS);
});

node.every(FULL_PUSH_INTERVAL_MS, () => {
  if (node.nodeId === leader() && store.size > 0) push(Array.from(store.values()));
});

node.run();
