#!/usr/bin/env node
'use strict';
// echo workload: answer every echo with the same payload. Correct.
const { Node } = require('./maelstrom');

const node = new Node();
node.on('echo', (msg) => node.reply(msg, { type: 'echo_ok', echo: msg.body.echo }));
node.run();
