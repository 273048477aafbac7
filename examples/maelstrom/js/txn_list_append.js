#!/usr/bin/env node
'use strict';
// txn-list-append workload. Correct: single leader, strict serializable.
//
// The leader (n0, the first of node_ids) holds every list and executes each
// whole transaction at once, one transaction at a time, so transactions
// take effect in a single serial order that respects real time. Every other
// node forwards the transaction to the leader and relays the answer; no
// answer within 1 s gives error 0 (timeout, indefinite). A read of a key
// that was never appended to returns null.
//
// Limits: in memory on the leader, so killing the leader loses the data.
const { Node, keyOf } = require('./maelstrom');

const node = new Node();
const FORWARD_TIMEOUT_MS = 1000;
const lists = new Map(); // canonical key -> array

node.on('txn', (msg) => {
  const leader = node.nodeIds[0];
  if (node.nodeId !== leader) {
    node.forward(msg, leader, FORWARD_TIMEOUT_MS);
    return;
  }
  const ops = msg.body.txn;
  // Validate first so a malformed txn is rejected as a whole, never half-applied.
  if (!Array.isArray(ops)) {
    node.error(msg, 12, 'txn must be a list');
    return;
  }
  for (const op of ops) {
    if (!Array.isArray(op) || op.length !== 3 || (op[0] !== 'r' && op[0] !== 'append')) {
      node.error(msg, 12, `bad micro-op ${JSON.stringify(op)}`);
      return;
    }
  }
  const result = ops.map(([f, k, v]) => {
    const kk = keyOf(k);
    if (f === 'r') {
      const cur = lists.get(kk);
      return ['r', k, cur === undefined ? null : cur.slice()];
    }
    if (!lists.has(kk)) lists.set(kk, []);
    lists.get(kk).push(v);
    return ['append', k, v];
  });
  node.reply(msg, { type: 'txn_ok', txn: result });
});

node.run();
