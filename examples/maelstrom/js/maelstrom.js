'use strict';
// A small Maelstrom node library for Node.js 20 (no npm packages).
//
// One process is one node. Messages are newline-delimited JSON on stdin and
// stdout; logs go to stderr. Node.js runs everything on one thread, so
// handlers, rpc callbacks and timers never race each other.
//
//   const { Node } = require('./maelstrom');
//   const node = new Node();
//   node.on('echo', (msg) => node.reply(msg, { type: 'echo_ok', echo: msg.body.echo }));
//   node.run();
//
// Handlers get the whole message ({src, dest, body}). Replies to rpcs are
// routed to their callback by in_reply_to; a reply that comes after its rpc
// timed out is dropped. A request type with no handler gets error 10
// (not-supported); a handler that throws gets error 13 (crash, indefinite),
// and the node keeps running. EOF on stdin exits 0.

const readline = require('readline');

const ERR = {
  TIMEOUT: 0,
  NODE_NOT_FOUND: 1,
  NOT_SUPPORTED: 10,
  TEMPORARILY_UNAVAILABLE: 11,
  MALFORMED_REQUEST: 12,
  CRASH: 13,
  ABORT: 14,
  KEY_DOES_NOT_EXIST: 20,
  KEY_ALREADY_EXISTS: 21,
  PRECONDITION_FAILED: 22,
  TXN_CONFLICT: 30,
};

function log(...args) {
  try {
    process.stderr.write(args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ') + '\n');
  } catch (e) {
    // nowhere left to log
  }
}

// A canonical string for any JSON value (map keys, set elements).
function keyOf(value) {
  if (Array.isArray(value)) return '[' + value.map(keyOf).join(',') + ']';
  if (value !== null && typeof value === 'object') {
    return '{' + Object.keys(value).sort().map((k) => JSON.stringify(k) + ':' + keyOf(value[k])).join(',') + '}';
  }
  return JSON.stringify(value === undefined ? null : value);
}

// A reply body received from elsewhere, without its routing ids.
function relayBody(body) {
  const out = {};
  for (const [k, v] of Object.entries(body)) {
    if (k !== 'msg_id' && k !== 'in_reply_to' && k !== 'timed_out') out[k] = v;
  }
  return out;
}

// Throw from a handler to answer the request with this error.
class RPCError extends Error {
  constructor(code, text) {
    super(text || '');
    this.code = code;
    this.text = text || '';
  }
}

class Node {
  constructor() {
    this.nodeId = null;
    this.nodeIds = [];
    this.nextMsgId = 0;
    this.handlers = new Map();
    this.initHooks = [];
    this.callbacks = new Map(); // msg_id -> {cb, timer}
    this.periodics = []; // {interval, fn}
    this.started = false;
    process.stdout.on('error', () => process.exit(0)); // reader went away
  }

  on(type, fn) {
    this.handlers.set(type, fn);
    return this;
  }

  // fn() runs once nodeId and nodeIds are known, before init_ok is sent.
  onInit(fn) {
    this.initHooks.push(fn);
    return this;
  }

  // Call fn() every `ms` milliseconds once the node is initialised.
  every(ms, fn) {
    this.periodics.push({ ms, fn });
    if (this.started) this._startTimer(ms, fn);
    return this;
  }

  otherNodes() {
    return this.nodeIds.filter((n) => n !== this.nodeId);
  }

  newMsgId() {
    this.nextMsgId += 1;
    return this.nextMsgId;
  }

  send(dest, body) {
    // Pipes are written synchronously on Linux, so this is flushed on return.
    process.stdout.write(JSON.stringify({ src: this.nodeId, dest, body }) + '\n');
  }

  reply(req, body) {
    const out = Object.assign({}, body);
    if (req.body && req.body.msg_id !== undefined && req.body.msg_id !== null) {
      out.in_reply_to = req.body.msg_id;
    }
    if (out.msg_id === undefined) out.msg_id = this.newMsgId();
    this.send(req.src, out);
  }

  error(req, code, text) {
    this.reply(req, { type: 'error', code, text: text || '' });
  }

  // Send a request; call cb(replyBody) exactly once: with the reply's body,
  // or after `timeoutMs` without one, with
  // {type: 'error', code: 0, timed_out: true}. Returns the msg_id used.
  rpc(dest, body, cb, timeoutMs = 1000) {
    const msgId = this.newMsgId();
    const timer = setTimeout(() => {
      if (this.callbacks.delete(msgId)) {
        this._safe(() => cb({ type: 'error', code: ERR.TIMEOUT, text: 'rpc timed out', timed_out: true }));
      }
    }, timeoutMs);
    this.callbacks.set(msgId, { cb, timer });
    this.send(dest, Object.assign({}, body, { msg_id: msgId }));
    return msgId;
  }

  // Forward client request `req` to `dest` and relay the answer. No answer
  // within timeoutMs: error 0 (timeout, indefinite), because the forwarded
  // request may still take effect.
  forward(req, dest, timeoutMs = 1000) {
    const body = Object.assign({}, req.body);
    delete body.msg_id;
    this.rpc(dest, body, (reply) => {
      if (reply.timed_out) {
        this.error(req, ERR.TIMEOUT,
          `no answer from ${dest} in ${timeoutMs} ms; the operation may or may not have taken effect`);
      } else {
        this.reply(req, relayBody(reply));
      }
    }, timeoutMs);
  }

  _safe(fn) {
    try {
      fn();
    } catch (e) {
      log('callback threw:', String(e && e.stack ? e.stack : e));
    }
  }

  _startTimer(ms, fn) {
    setInterval(() => this._safe(fn), ms);
  }

  _handleInit(msg) {
    const b = msg.body;
    if (typeof b.node_id !== 'string') throw new RPCError(ERR.MALFORMED_REQUEST, 'init without node_id');
    this.nodeId = b.node_id;
    this.nodeIds = Array.isArray(b.node_ids) ? b.node_ids.slice() : [this.nodeId];
    for (const hook of this.initHooks) hook();
    this.reply(msg, { type: 'init_ok' });
    if (!this.started) {
      this.started = true;
      for (const p of this.periodics) this._startTimer(p.ms, p.fn);
    }
  }

  _dispatch(msg) {
    const body = msg.body;
    if (body === null || typeof body !== 'object') {
      log('message without a body:', msg);
      return;
    }
    const type = body.type;
    const irt = body.in_reply_to;
    if (irt !== undefined && irt !== null) {
      const entry = this.callbacks.get(irt);
      if (entry) {
        this.callbacks.delete(irt);
        clearTimeout(entry.timer);
        this._safe(() => entry.cb(body));
        return;
      }
      // A late reply to a timed-out rpc, or to a fire-and-forget send.
      if (!this.handlers.has(type)) return;
    }
    const hasId = body.msg_id !== undefined && body.msg_id !== null;
    const fn = type === 'init' ? (m) => this._handleInit(m) : this.handlers.get(type);
    if (!fn) {
      if (hasId && msg.src) this.error(msg, ERR.NOT_SUPPORTED, `unsupported type ${JSON.stringify(type)}`);
      return;
    }
    try {
      fn(msg);
    } catch (e) {
      if (e instanceof RPCError) {
        if (hasId) this.error(msg, e.code, e.text);
      } else {
        log(`handler for ${type} threw:`, String(e && e.stack ? e.stack : e));
        if (hasId) this.error(msg, ERR.CRASH, `handler crashed: ${e}`);
      }
    }
  }

  run() {
    const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
    rl.on('line', (line) => {
      line = line.trim();
      if (!line) return;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch (e) {
        log('not JSON:', line.slice(0, 200));
        return;
      }
      if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
        log('not a message:', line.slice(0, 200));
        return;
      }
      this._dispatch(msg);
    });
    rl.on('close', () => process.exit(0));
  }
}

module.exports = { Node, RPCError, ERR, log, keyOf, relayBody };
