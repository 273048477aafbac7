"""A small Maelstrom node library (Python 3.11, stdlib only).

One process is one node. Messages are newline-delimited JSON on stdin
and stdout; logs go to stderr. Every handler, rpc callback and timer runs
while holding ``node.lock``, so node code never needs its own locking.

    node = Node()

    @node.handler("echo")
    def echo(msg):
        node.reply(msg, {"type": "echo_ok", "echo": msg["body"]["echo"]})

    node.run()

Handlers get the whole message (``{"src", "dest", "body"}``). Replies to
rpcs are routed to their callback by ``in_reply_to``; a reply that comes
after its rpc timed out is dropped. A request type with no handler gets
error 10 (not-supported); a handler that raises gets error 13 (crash,
indefinite), so the node itself keeps running.
"""

import json
import os
import sys
import threading
import time

# Maelstrom error codes.
TIMEOUT = 0
NODE_NOT_FOUND = 1
NOT_SUPPORTED = 10
TEMPORARILY_UNAVAILABLE = 11
MALFORMED_REQUEST = 12
CRASH = 13
ABORT = 14
KEY_DOES_NOT_EXIST = 20
KEY_ALREADY_EXISTS = 21
PRECONDITION_FAILED = 22
TXN_CONFLICT = 30


def log(*args):
    """Write one line to stderr (never stdout)."""
    try:
        print(*args, file=sys.stderr, flush=True)
    except Exception:
        pass


class RPCError(Exception):
    def __init__(self, code, text=""):
        super().__init__(text)
        self.code = code
        self.text = text


class Node:
    def __init__(self):
        self.node_id = None
        self.node_ids = []
        self.lock = threading.RLock()
        self._out_lock = threading.Lock()
        self._next_msg_id = 0
        self._handlers = {}
        self._init_hooks = []
        # msg_id -> [callback, deadline]
        self._callbacks = {}
        # each: [interval, next_due, fn]
        self._timers = []
        self._timer_thread = None

    # ----------------------------------------------------------- registry
    def handler(self, msg_type):
        """Decorator: register fn(msg) for requests of this type."""
        def register(fn):
            self._handlers[msg_type] = fn
            return fn
        return register

    def on(self, msg_type, fn):
        self._handlers[msg_type] = fn

    def on_init(self, fn):
        """fn() runs (under the lock) once node_id and node_ids are known,
        before init_ok is sent."""
        self._init_hooks.append(fn)
        return fn

    def every(self, interval, fn):
        """Call fn() every ``interval`` seconds once the node is initialised."""
        self._timers.append([interval, time.monotonic() + interval, fn])
        return fn

    def periodic(self, interval):
        def register(fn):
            return self.every(interval, fn)
        return register

    # ------------------------------------------------------------- helpers
    def other_nodes(self):
        return [n for n in self.node_ids if n != self.node_id]

    def new_msg_id(self):
        with self.lock:
            self._next_msg_id += 1
            return self._next_msg_id

    # -------------------------------------------------------------- output
    def send(self, dest, body):
        """Send one message. Returns nothing; never raises on a closed pipe
        (the process exits instead)."""
        line = json.dumps({"src": self.node_id, "dest": dest, "body": body},
                          separators=(",", ":"))
        with self._out_lock:
            try:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                os._exit(0)

    def reply(self, req, body):
        """Reply to request message ``req`` (a whole message)."""
        body = dict(body)
        mid = req.get("body", {}).get("msg_id")
        if mid is not None:
            body["in_reply_to"] = mid
        body.setdefault("msg_id", self.new_msg_id())
        self.send(req["src"], body)

    def error(self, req, code, text=""):
        self.reply(req, {"type": "error", "code": code, "text": text})

    def rpc(self, dest, body, callback, timeout=1.0):
        """Send a request and call ``callback(reply_body)`` once: with the
        reply's body, or, if no reply arrives within ``timeout`` seconds,
        with a synthetic ``{"type": "error", "code": 0, "timed_out": True}``.
        Returns the msg_id used."""
        body = dict(body)
        with self.lock:
            mid = self.new_msg_id()
            body["msg_id"] = mid
            self._callbacks[mid] = [callback, time.monotonic() + timeout]
        self.send(dest, body)
        return mid

    def forward(self, req, dest, timeout=1.0):
        """Forward client request ``req`` to node ``dest`` and relay the
        answer to the client. If no answer comes within ``timeout``, the
        client gets error 0 (timeout, indefinite): the forwarded request
        may still be applied."""
        body = {k: v for k, v in req["body"].items() if k != "msg_id"}

        def done(reply):
            if reply.get("timed_out"):
                self.error(req, TIMEOUT,
                           "no answer from %s in %.1fs; the operation may or "
                           "may not have taken effect" % (dest, timeout))
            else:
                self.reply(req, relay_body(reply))
        self.rpc(dest, body, done, timeout)

    # --------------------------------------------------------------- input
    def _handle_init(self, msg):
        body = msg["body"]
        self.node_id = body["node_id"]
        self.node_ids = list(body.get("node_ids") or [self.node_id])
        for hook in self._init_hooks:
            hook()
        self.reply(msg, {"type": "init_ok"})
        if self._timer_thread is None:
            now = time.monotonic()
            for t in self._timers:
                t[1] = now + t[0]
            self._timer_thread = threading.Thread(target=self._timer_loop,
                                                  daemon=True)
            self._timer_thread.start()

    def _dispatch(self, msg):
        body = msg.get("body")
        if not isinstance(body, dict):
            log("message without a body:", msg)
            return
        mtype = body.get("type")
        irt = body.get("in_reply_to")
        if irt is not None:
            entry = self._callbacks.pop(irt, None)
            if entry is not None:
                try:
                    entry[0](body)
                except Exception as e:  # a bad callback must not kill the node
                    log("rpc callback raised:", repr(e))
                return
            if mtype not in self._handlers:
                # A reply to an rpc that already timed out, or to a
                # fire-and-forget send: drop it.
                return
        if mtype == "init":
            try:
                self._handle_init(msg)
            except Exception as e:
                log("init failed:", repr(e))
                self.error(msg, MALFORMED_REQUEST, "bad init: %r" % (e,))
            return
        fn = self._handlers.get(mtype)
        if fn is None:
            if body.get("msg_id") is not None and "src" in msg:
                self.error(msg, NOT_SUPPORTED, "unsupported type %r" % (mtype,))
            return
        try:
            fn(msg)
        except RPCError as e:
            if body.get("msg_id") is not None:
                self.error(msg, e.code, e.text)
        except Exception as e:
            log("handler for %r raised: %r" % (mtype, e))
            if body.get("msg_id") is not None:
                self.error(msg, CRASH, "handler crashed: %r" % (e,))

    def _timer_loop(self):
        while True:
            time.sleep(0.005)
            now = time.monotonic()
            with self.lock:
                expired = [mid for mid, e in self._callbacks.items()
                           if e[1] <= now]
                for mid in expired:
                    cb = self._callbacks.pop(mid)[0]
                    try:
                        cb({"type": "error", "code": TIMEOUT,
                            "text": "rpc timed out", "timed_out": True})
                    except Exception as e:
                        log("timeout callback raised:", repr(e))
                for t in self._timers:
                    if t[1] <= now:
                        t[1] = now + t[0]
                        try:
                            t[2]()
                        except Exception as e:
                            log("timer raised:", repr(e))

    def run(self):
        """Read stdin until EOF, then exit 0."""
        stdin = sys.stdin
        while True:
            try:
                line = stdin.readline()
            except (KeyboardInterrupt, OSError):
                break
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                log("not JSON:", line[:200])
                continue
            if not isinstance(msg, dict):
                log("not a message:", line[:200])
                continue
            with self.lock:
                self._dispatch(msg)
        try:
            sys.stdout.flush()
        except Exception:
            pass
        os._exit(0)


def key_of(value):
    """A hashable, canonical form of any JSON value (keys, set elements)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def relay_body(reply_body):
    """A reply body received from elsewhere, stripped of its routing ids,
    ready to pass to ``Node.reply``."""
    out = {k: v for k, v in reply_body.items()
           if k not in ("msg_id", "in_reply_to", "timed_out")}
    return out
