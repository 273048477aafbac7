#!/usr/bin/env node
'use strict';
// g-counter / pn-counter workloads. BUG "double-counts on retry".
//
// Op-based: an add is applied locally, acked, and sent as a delta message
// to every other node, resent every 60 ms until that node acks it. The
// receiver applies EVERY delta message it gets (it does not remember which
// ops it already applied), so whenever an ack is slow (network delay above
// ~30 ms each way, a paused node) or lost (random loss, a partition
// dropping the ack), the retry is applied a second (third, ...) time and
// the final reads exceed the sum of all deltas. Looks correct on a fast,
// lossless network.
const { Node } = require('./maelstrom');

const node = new Node();
const RETRY_AFTER_MS = 60;
let total = 0;
let opCounter = 0;
const pending = new Map(); // `${peer} ${op}` -> {peer, op, delta, lastSent}

function sendDelta(p) {
  node.send(p.peer, { type: 'delta', op: p.op, delta: p.delta, msg_id: node.newMsgId() });
}

node.on('add', (msg) => {
  const delta = msg.body.delta;
  if (!Number.isSafeInteger(delta)) {
    node.error(msg, 12, 'delta must be an integer');
    return;
  }
  total += delta;
  const now = Date.now();
  for (const peer of node.otherNodes()) {
    opCounter += 1;
    const p = { peer, op: opCounter, delta, lastSent: now };
    pending.set(`${peer} ${p.op}`, p);
    sendDelta(p);
  }
  node.reply(msg, { type: 'add_ok' });
});

node.on('delta', (msg) => {
  total += msg.body.delta; // BUG: no dedup by op id
  node.reply(msg, { type: 'delta_ok', op: msg.body.op });
});

node.on('delta_ok', (msg) => {
  pending.delete(`${msg.src} ${msg.body.op}`);
});

node.on('read', (msg) => node.reply(msg, { type: 'read_ok', value: total }));

node.every(10, () => {
  const now = Date.now();
  for (const p of pending.values()) {
    if (now - p.lastSent >= RETRY_AFTER_MS) {
      p.lastSent = now;
      sendDelta(p);
    }
  }
});

node.run();
