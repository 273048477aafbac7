#!/usr/bin/env node
'use strict';
// broadcast workload. Correct.
//
// Every node keeps the set of messages it has seen and, for each
// neighbour, the subset that neighbour is known to have (it acknowledged
// them, or it sent them to us). Every 100 ms it sends each neighbour one
// batch with everything that neighbour is not known to have; the neighbour
// merges the batch and answers with the list it got, which the sender
// marks as known. A dropped batch or ack is resent on the next tick, so
// loss and partitions are survived.
//
// Neighbours follow the topology: on `topology` the node keeps its own
// entry topology[node_id] (made symmetric: a node that lists us is our
// neighbour too). Messages learned from one neighbour are not known to the
// others, so the next tick relays them onward: every message spreads hop
// by hop along the graph, one tick per hop, until all nodes have it.
// Before a topology arrives, if it has no entry for this node, or if the
// graph it describes does not connect all of node_ids, the node gossips to
// all other nodes instead.
//
// Restarts: every message between nodes carries the sender's per-process
// boot nonce. When a peer's nonce changes, that peer restarted and lost
// its set, so everything is marked unknown for it again and it is
// refilled. A neighbour that has answered one of our gossips knows our
// nonce; to any other neighbour the node sends a `hello` 1 s after init
// (retried until answered), so a restarted node is refilled even when
// nothing else is happening. Gossip that reaches a new process before its
// init is dropped (the sender retries). A restarted node gets no new
// `topology`: until it has one it gossips to all other nodes and asks for
// the map in its gossips and hellos; the first answer that carries one
// restores it.
const crypto = require('crypto');
const { Node } = require('./maelstrom');

const node = new Node();
const BOOT = crypto.randomBytes(8).toString('hex');
const GOSSIP_INTERVAL_MS = 100;
const HELLO_AFTER_MS = 1000; // after init: hello to neighbours not yet gossiped with
const MAX_BATCH = 5000;

const messages = new Set();
const known = new Map(); // peer -> Set of messages that peer is known to have
const peerBoot = new Map(); // peer -> last boot nonce seen from it
let topo = null; // the whole topology map, once received
let neighbours = []; // whom we gossip with (all other nodes until a topology)
const helloDone = new Set(); // peers that answered a hello or gossip (know our nonce)
const helloPending = new Set(); // peers with a hello in flight
let initTime = 0;

function knownBy(peer) {
  if (!known.has(peer)) known.set(peer, new Set());
  return known.get(peer);
}

function noteBoot(peer, boot) {
  if (boot === undefined || boot === null) return;
  if (peerBoot.get(peer) !== boot) {
    // The peer restarted since we last heard from it: it lost its set.
    if (peerBoot.has(peer)) known.set(peer, new Set());
    peerBoot.set(peer, boot);
  }
}

// This node's neighbours in topology map t (symmetric closure), or all
// other nodes if t has no usable entry or does not connect every node.
function neighboursFrom(t) {
  const others = node.otherNodes();
  if (t === null || typeof t !== 'object' || Array.isArray(t)) return others;
  const ids = new Set(node.nodeIds);
  const adj = new Map(node.nodeIds.map((n) => [n, new Set()]));
  for (const [a, bs] of Object.entries(t)) {
    if (!ids.has(a) || !Array.isArray(bs)) continue;
    for (const b of bs) {
      if (ids.has(b) && b !== a) {
        adj.get(a).add(b);
        adj.get(b).add(a);
      }
    }
  }
  const seen = new Set([node.nodeId]);
  const todo = [node.nodeId];
  while (todo.length > 0) {
    for (const b of adj.get(todo.pop())) {
      if (!seen.has(b)) {
        seen.add(b);
        todo.push(b);
      }
    }
  }
  if (seen.size !== ids.size || adj.get(node.nodeId).size === 0) return others;
  return node.nodeIds.filter((n) => adj.get(node.nodeId).has(n));
}

function setTopology(t) {
  topo = t;
  neighbours = neighboursFrom(t);
}

function learnTopology(reply) {
  const t = reply.topology;
  if (topo === null && t !== null && typeof t === 'object' && !Array.isArray(t)) {
    setTopology(t); // we restarted: learn it back
  }
}

function sortedMessages() {
  return Array.from(messages).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

node.onInit(() => {
  neighbours = node.otherNodes();
  initTime = Date.now();
});

node.on('topology', (msg) => {
  setTopology(msg.body.topology === undefined ? null : msg.body.topology);
  node.reply(msg, { type: 'topology_ok' });
});

node.on('broadcast', (msg) => {
  messages.add(msg.body.message);
  node.reply(msg, { type: 'broadcast_ok' });
});

node.on('read', (msg) => node.reply(msg, { type: 'read_ok', messages: sortedMessages() }));

// A restarted process can get gossip before its init; it has no node id
// to answer from yet, so it drops it (the sender retries).
function beforeInit() {
  return node.nodeId === null;
}

node.on('hello', (msg) => {
  if (beforeInit()) return;
  noteBoot(msg.src, msg.body.boot);
  node.reply(msg, { type: 'hello_ok', boot: BOOT, topology: msg.body.want_topology ? topo : null });
});

node.on('gossip', (msg) => {
  if (beforeInit()) return;
  const peer = msg.src;
  noteBoot(peer, msg.body.boot);
  const got = Array.isArray(msg.body.messages) ? msg.body.messages : [];
  const theirs = knownBy(peer);
  for (const m of got) {
    messages.add(m);
    // What the peer sent, it obviously has; our other neighbours do not
    // know it yet, so the next tick relays it to them.
    theirs.add(m);
  }
  const out = { type: 'gossip_ok', messages: got, boot: BOOT };
  if (msg.body.want_topology && topo !== null) out.topology = topo;
  node.reply(msg, out);
});

node.every(GOSSIP_INTERVAL_MS, () => {
  const sayHello = Date.now() - initTime >= HELLO_AFTER_MS;
  for (const peer of neighbours.slice()) {
    const have = knownBy(peer);
    const batch = [];
    for (const m of messages) {
      if (!have.has(m)) {
        batch.push(m);
        if (batch.length >= MAX_BATCH) break;
      }
    }
    if (batch.length > 0) {
      const body = { type: 'gossip', messages: batch, boot: BOOT };
      if (topo === null) body.want_topology = true;
      node.rpc(peer, body, (reply) => {
        if (reply.type !== 'gossip_ok') return; // timed out: resent on a later tick
        helloDone.add(peer);
        noteBoot(peer, reply.boot);
        if (peerBoot.get(peer) === reply.boot) {
          const set = knownBy(peer);
          for (const m of Array.isArray(reply.messages) ? reply.messages : batch) set.add(m);
        }
        learnTopology(reply);
      }, 1000);
    } else if (sayHello && !helloDone.has(peer) && !helloPending.has(peer)) {
      helloPending.add(peer);
      const body = { type: 'hello', boot: BOOT };
      if (topo === null) body.want_topology = true;
      node.rpc(peer, body, (reply) => {
        helloPending.delete(peer);
        if (reply.type !== 'hello_ok') return; // timed out: retried on a later tick
        helloDone.add(peer);
        noteBoot(peer, reply.boot);
        learnTopology(reply);
      }, 1000);
    }
  }
});

node.run();
