#!/usr/bin/env node
'use strict';
// lin-kv workload. Correct: single leader.
//
// The leader is the first of node_ids (n0). It holds the whole map and
// answers read, write and cas itself, one message at a time, so every op
// takes effect at one instant between its request and its reply. Every
// other node forwards each client request to the leader and relays the
// answer. If the leader does not answer within 1 s (partition, pause,
// loss) the client gets error 0 (timeout, indefinite): the forwarded op
// may still take effect later, so no definite error is ever given for it.
//
// Limits: the map is in memory, so killing the leader loses it (not safe
// under a kill nemesis); isolating the leader makes every op on the other
// side time out, which is correct (unavailable, not wrong).
const { Node, keyOf } = require('./maelstrom');

const node = new Node();
const FORWARD_TIMEOUT_MS = 1000;
const store = new Map(); // canonical key -> value

function isEqual(a, b) {
  return keyOf(a) === keyOf(b);
}

function apply(msg) {
  const b = msg.body;
  if (!('key' in b)) {
    node.error(msg, 12, 'missing key');
    return;
  }
  const k = keyOf(b.key);
  if (b.type === 'read') {
    if (!store.has(k)) node.error(msg, 20, 'key does not exist');
    else node.reply(msg, { type: 'read_ok', value: store.get(k) });
  } else if (b.type === 'write') {
    store.set(k, b.value);
    node.reply(msg, { type: 'write_ok' });
  } else if (b.type === 'cas') {
    if (!store.has(k)) {
      if (b.create_if_not_exists) {
        store.set(k, b.to);
        node.reply(msg, { type: 'cas_ok' });
      } else {
        node.error(msg, 20, 'key does not exist');
      }
    } else if (!isEqual(store.get(k), b.from)) {
      node.error(msg, 22, `expected ${JSON.stringify(b.from)}, had ${JSON.stringify(store.get(k))}`);
    } else {
      store.set(k, b.to);
      node.reply(msg, { type: 'cas_ok' });
    }
  }
}

function handle(msg) {
  const leader = node.nodeIds[0];
  if (node.nodeId === leader) apply(msg);
  else node.forward(msg, leader, FORWARD_TIMEOUT_MS);
}

for (const t of ['read', 'write', 'cas']) node.on(t, handle);
node.run();
