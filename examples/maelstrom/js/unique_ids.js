#!/usr/bin/env node
'use strict';
// unique-ids workload. Correct: an id is node id + a random nonce drawn at
// process start + a counter, so ids differ across nodes, across restarts of
// one node (fresh nonce) and within one process (counter). No coordination.
const crypto = require('crypto');
const { Node } = require('./maelstrom');

const node = new Node();
const BOOT = crypto.randomBytes(8).toString('hex'); // 64 random bits per process
let counter = 0;

node.on('generate', (msg) => {
  counter += 1;
  node.reply(msg, { type: 'generate_ok', id: `${node.nodeId}-${BOOT}-${counter}` });
});
node.run();
