#!/usr/bin/env node
'use strict';
// broadcast workload. Correct.
//
// Every node keeps the set of messages it has seen and, for every other
// node, the subset that peer has acknowledged. Every 100 ms it sends each
// peer one batch with everything that peer has not acknowledged yet; the
// peer merges the batch and answers with the list it got, which the sender
// marks acknowledged. A dropped batch or ack is resent on the next tick, so
// loss and partitions are survived: after a heal every node has every
// message within a tick or two.
//
// Messages go straight to every other node (all of node_ids), not along the
// topology: the topology is accepted and ignored, which is allowed because
// every node can reach every other one.
//
// Restarts: every gossip carries the sender's per-process boot nonce. When
// a peer's nonce changes, that peer restarted and lost its set, so
// everything is marked unacknowledged for it again and it is refilled.
const crypto = require('crypto');
const { Node } = require('./maelstrom');

const node = new Node();
const BOOT = crypto.randomBytes(8).toString('hex');
const GOSSIP_INTERVAL_MS = 100;
const MAX_BATCH = 5000;

const messages = new Set();
const acked = new Map(); // peer -> Set of messages that peer confirmed
const peerBoot = new Map(); // peer -> last boot nonce seen from it

function ackedBy(peer) {
  if (!acked.has(peer)) acked.set(peer, new Set());
  return acked.get(peer);
}

function noteBoot(peer, boot) {
  if (boot === undefined || boot === null) return;
  if (peerBoot.get(peer) !== boot) {
    // The peer restarted since we last heard from it: it lost its set.
    if (peerBoot.has(peer)) acked.set(peer, new Set());
    peerBoot.set(peer, boot);
  }
}

function sortedMessages() {
  return Array.from(messages).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

node.on('topology', (msg) => node.reply(msg, { type: 'topology_ok' }));

node.on('broadcast', (msg) => {
  messages.add(msg.body.message);
  node.reply(msg, { type: 'broadcast_ok' });
});

node.on('read', (msg) => node.reply(msg, { type: 'read_ok', messages: sortedMessages() }));

node.on('gossip', (msg) => {
  const peer = msg.src;
  noteBoot(peer, msg.body.boot);
  const got = Array.isArray(msg.body.messages) ? msg.body.messages : [];
  const mine = ackedBy(peer);
  for (const m of got) {
    messages.add(m);
    mine.add(m); // what the peer sent, it obviously has
  }
  node.reply(msg, { type: 'gossip_ok', messages: got, boot: BOOT });
});

node.every(GOSSIP_INTERVAL_MS, () => {
  for (const peer of node.otherNodes()) {
    const have = ackedBy(peer);
    const batch = [];
    for (const m of messages) {
      if (!have.has(m)) {
        batch.push(m);
        if (batch.length >= MAX_BATCH) break;
      }
    }
    if (batch.length === 0) continue;
    node.rpc(peer, { type: 'gossip', messages: batch, boot: BOOT }, (reply) => {
      if (reply.type !== 'gossip_ok') return; // timed out: resent on a later tick
      noteBoot(peer, reply.boot);
      if (peerBoot.get(peer) === reply.boot) {
        const set = ackedBy(peer);
        for (const m of Array.isArray(reply.messages) ? reply.messages : batch) set.add(m);
      }
    }, 1000);
  }
});

node.run();
