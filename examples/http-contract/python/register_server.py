#!/usr/bin/env python3
"""A replicated register store that follows splitbrain's HTTP contract (docs/http-contract.md).

Python 3.11, standard library only. Node 1 is the primary: it orders every operation
under one lock and persists its whole map to --data-dir (temp file, fsync, rename, fsync
of the directory) before it answers, so a kill -9 loses nothing it acknowledged. Every
other node forwards POST /kv to node 1's peer address from --peers -- the harness's proxy
for that link, so a partition cuts it -- and answers an indefinite error when the
forward's outcome is unknown. That is correct under partitions, kills and pauses (it is
unavailable without node 1, never wrong).

    register_server.py --id 2 --client-listen 127.0.0.1:7002 --peer-listen 127.0.0.1:8002 \\
        --peers 1=127.0.0.1:9021,3=127.0.0.1:9023 --data-dir /tmp/n2 \\
        [--request-timeout-ms 900] [--bug stale-read]

--bug stale-read is a deliberate mistake for the harness to find: a follower remembers
the value of every key it has seen go through it and answers later reads of that key from
this cache instead of asking node 1, so it returns values other nodes have overwritten.
"""

import argparse
import http.client
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PRIMARY = 1
BUGS = ("stale-read",)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--id", type=int, required=True, help="this node's id, 1-based")
    p.add_argument("--client-listen", required=True, help="HOST:PORT for clients")
    p.add_argument("--peer-listen", required=True, help="HOST:PORT for other nodes")
    p.add_argument(
        "--peers",
        default="",
        help="comma-separated J=HOST:PORT: where this node dials node J",
    )
    p.add_argument("--data-dir", required=True, help="where node 1 keeps its map")
    p.add_argument(
        "--request-timeout-ms",
        type=int,
        default=900,
        help="bound on a forwarded request; answer before the client gives up",
    )
    p.add_argument("--bug", action="append", default=[], choices=BUGS)
    return p.parse_args(argv)


def split_addr(addr):
    host, _, port = addr.rpartition(":")
    return host, int(port)


def parse_peers(text):
    peers = {}
    for item in filter(None, text.split(",")):
        node, _, addr = item.partition("=")
        peers[int(node)] = split_addr(addr)
    return peers


class Store:
    """Node 1's map: applied one op at a time, persisted before each answer."""

    def __init__(self, data_dir):
        self.path = os.path.join(data_dir, "state.json")
        self.data_dir = data_dir
        self.lock = threading.Lock()
        self.values = {}  # canonical JSON of the key -> (key, value)
        os.makedirs(data_dir, exist_ok=True)
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                for key, value in json.load(f)["pairs"]:
                    self.values[canonical(key)] = (key, value)

    def persist(self):
        # A crash at any point leaves either the old file or the new one, never a torn
        # one: write aside, fsync, rename over, fsync the directory (the rename).
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"pairs": list(self.values.values())}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def apply(self, req):
        f, key, value = req.get("f"), req.get("key"), req.get("value")
        k = canonical(key)
        with self.lock:
            current = self.values.get(k, (key, None))[1]
            if f == "read":
                return {"type": "ok", "value": current}
            if f == "write":
                new = value
            elif f == "cas":
                if not isinstance(value, list) or len(value) != 2:
                    return {"type": "fail", "error": "bad-request"}
                if current != value[0]:
                    return {"type": "fail", "error": "cas-mismatch"}
                new = value[1]
            elif f == "append":
                if current is not None and not isinstance(current, list):
                    return {"type": "fail", "error": "not-a-list"}
                new = (current or []) + [value]
            else:
                return {"type": "fail", "error": "bad-request"}
            self.values[k] = (key, new)
            try:
                self.persist()
            except OSError as e:
                # Memory now holds a value the disk may not: stop rather than answer from
                # it (crash-stop is what the harness's kill tests assume anyway).
                print(f"persist failed: {e}; exiting", file=sys.stderr, flush=True)
                os._exit(1)
            return {"type": "ok"}


def canonical(key):
    return json.dumps(key, sort_keys=True)


class Node:
    def __init__(self, args):
        self.id = args.id
        self.peers = parse_peers(args.peers)
        self.timeout = max(args.request_timeout_ms - 50, 50) / 1000.0
        self.stale_read = "stale-read" in args.bug
        self.store = Store(args.data_dir) if self.id == PRIMARY else None
        self.cache = {}  # only with --bug stale-read: key -> last value seen
        self.cache_lock = threading.Lock()

    def status(self):
        role = "leader" if self.id == PRIMARY else "follower"
        return {"id": self.id, "shards": [{"shard": 0, "role": role, "leader": PRIMARY}]}

    def kv(self, req):
        if self.store is not None:
            return self.store.apply(req)
        if self.stale_read and req.get("f") == "read":
            with self.cache_lock:
                hit = self.cache.get(canonical(req.get("key")))
            if hit is not None:
                return {"type": "ok", "value": hit[0]}
        answer = self.forward(req)
        if self.stale_read and answer.get("type") == "ok":
            self.remember(req, answer)
        return answer

    def remember(self, req, answer):
        f, key, value = req.get("f"), req.get("key"), req.get("value")
        seen = {"read": answer.get("value"), "write": value}.get(f)
        if f == "cas" and isinstance(value, list) and len(value) == 2:
            seen = value[1]
        with self.cache_lock:
            if f in ("read", "write", "cas"):
                self.cache[canonical(key)] = (seen,)
            else:
                self.cache.pop(canonical(key), None)

    def forward(self, req):
        """Sends `req` to the primary's peer port; what the harness may conclude from
        each failure is in docs/http-contract.md (definite `fail` only when the primary
        certainly never saw it, or for a read, which changes nothing)."""
        is_read = req.get("f") == "read"
        addr = self.peers.get(PRIMARY)
        if addr is None:
            return {"type": "fail", "error": "no-primary"}
        conn = http.client.HTTPConnection(addr[0], addr[1], timeout=self.timeout)
        body = json.dumps(req).encode()
        try:
            try:
                conn.connect()
            except ConnectionRefusedError:
                return {"type": "fail", "error": "unavailable"}
            except OSError as e:
                return {"type": "fail", "error": f"unavailable: {e}"}
            conn.request(
                "POST", "/peer/kv", body, {"Content-Type": "application/json"}
            )
            resp = conn.getresponse()
            return json.loads(resp.read())
        except (OSError, http.client.HTTPException, ValueError) as e:
            # Sent, perhaps applied: unknown, unless it was a read.
            if is_read:
                return {"type": "fail", "error": f"timeout: {e}"}
            return {"type": "info", "error": f"timeout: {e}"}
        finally:
            conn.close()


def make_handler(node, peer_port):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the harness's clients reuse connections
        # Headers and body go out in two writes; without this, Nagle holds the body until
        # the client's delayed ACK of the headers (up to 40 ms per request).
        disable_nagle_algorithm = True

        def log_message(self, *_):
            pass  # one line per request would drown the node's log

        def reply(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health" and not peer_port:
                self.reply(200, {"ok": True, "id": node.id})
            elif self.path == "/status" and not peer_port:
                self.reply(200, node.status())
            else:
                self.reply(404, {"type": "fail", "error": "not-found"})

        def do_POST(self):
            wanted = "/peer/kv" if peer_port else "/kv"
            try:
                length = int(self.headers.get("Content-Length", "0"))
                req = json.loads(self.rfile.read(length))
                if not isinstance(req, dict):
                    raise ValueError("expected a JSON object")
            except ValueError as e:
                self.reply(400, {"type": "fail", "error": "bad-request", "detail": str(e)})
                return
            if self.path != wanted:
                self.reply(404, {"type": "fail", "error": "not-found"})
                return
            if peer_port and node.store is None:
                # Only the primary serves forwarded requests; it never forwards itself.
                self.reply(200, {"type": "fail", "error": "not-primary"})
                return
            self.reply(200, node.kv(req))

    return Handler


def serve(addr, handler):
    server = ThreadingHTTPServer(split_addr(addr), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


def main(argv):
    args = parse_args(argv)
    node = Node(args)
    serve(args.peer_listen, make_handler(node, True))
    client = serve(args.client_listen, make_handler(node, False))
    role = "primary" if node.id == PRIMARY else "follower"
    print(
        f"register_server node {node.id} ({role}), bugs {args.bug}, "
        f"client {args.client_listen}, peer {args.peer_listen}",
        flush=True,
    )
    client.join()


if __name__ == "__main__":
    main(sys.argv[1:])
