#!/usr/bin/env node
'use strict';
// broadcast workload. BUG "fire-and-forget gossip".
//
// On a client broadcast the node adds the message, acks, and sends it to
// every other node exactly once, with no retry, no acknowledgement and no
// anti-entropy. Any copy dropped by a partition or by random loss is gone
// for good, so after the heal some nodes never read some acknowledged
// messages. Without faults it looks correct.
const { Node } = require('./maelstrom');

const node = new Node();
const messages = new Set();

node.on('topology', (msg) => node.reply(msg, { type: 'topology_ok' }));

node.on('broadcast', (msg) => {
  const m = msg.body.message;
  if (!messages.has(m)) {
    messages.add(m);
    for (const peer of node.otherNodes()) node.send(peer, { type: 'relay', message: m });
  }
  node.reply(msg, { type: 'broadcast_ok' });
});

node.on('relay', (msg) => {
  messages.add(msg.body.message); // no reply, nothing forwarded
});

node.on('read', (msg) => node.reply(msg, {
  type: 'read_ok',
  messages: Array.from(messages).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
}));

node.run();
