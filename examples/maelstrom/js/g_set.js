#!/usr/bin/env node
'use strict';
// g-set workload. Correct: a state-based grow-only set.
//
// add puts the element in the local set and acks at once. Every 200 ms the
// node sends its whole set to every other node (fire-and-forget); a
// receiver merges by union. Union is idempotent, commutative and
// associative, so dropped, duplicated and reordered gossip is harmless and
// all nodes converge one round after a heal. A restarted node is refilled
// by its peers' next rounds.
const { Node, keyOf } = require('./maelstrom');

const node = new Node();
const GOSSIP_INTERVAL_MS = 200;
const elements = new Map(); // canonical JSON -> element (any JSON value)

node.on('add', (msg) => {
  const e = msg.body.element;
  elements.set(keyOf(e), e);
  node.reply(msg, { type: 'add_ok' });
});

node.on('read', (msg) => node.reply(msg, { type: 'read_ok', value: Array.from(elements.values()) }));

node.on('replicate', (msg) => {
  for (const e of Array.isArray(msg.body.value) ? msg.body.value : []) elements.set(keyOf(e), e);
});

node.every(GOSSIP_INTERVAL_MS, () => {
  if (elements.size === 0) return;
  const value = Array.from(elements.values());
  for (const peer of node.otherNodes()) node.send(peer, { type: 'replicate', value });
});

node.run();
