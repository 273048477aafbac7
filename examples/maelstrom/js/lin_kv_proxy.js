#!/usr/bin/env node
'use strict';
// lin-kv workload. Correct: a stateless proxy to the harness's lin-kv
// service.
//
// Every read, write and cas is sent, unchanged, to the `lin-kv` service and
// its answer (read_ok / write_ok / cas_ok / error 20 / error 22 / ...) is
// relayed to the client. No answer within 1 s gives error 0 (timeout,
// indefinite). Because the node holds no state, it stays correct under
// kills and restarts as well as partitions (unlike lin_kv.js, whose leader
// keeps the map in memory).
const { Node } = require('./maelstrom');

const node = new Node();
const SERVICE = 'lin-kv';
const TIMEOUT_MS = 1000;

for (const t of ['read', 'write', 'cas']) node.on(t, (msg) => node.forward(msg, SERVICE, TIMEOUT_MS));
node.run();
