#!/usr/bin/env python3
"""kafka workload. Correct: single leader.

The leader is the first of node_ids (n0). It holds every log (a list per
key: a message's offset is its index, so offsets are dense from 0) and
the committed offset of every key, and serves send, poll, commit_offsets
and list_committed_offsets itself, one message at a time: offsets are
handed out once, a poll sees every message acknowledged before it, and a
committed offset only moves up. Every other node forwards each client
request to the leader and relays the answer; no answer within 1 s gives
error 0 (timeout, indefinite: the send may still land).

Limits: in memory only, so killing the leader loses the logs (run it
under partition / pause / loss, not kill).
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()
FORWARD_TIMEOUT = 1.0
POLL_LIMIT = 100  # messages per key per poll; the consumer polls again for more
logs = {}  # key -> [msg, ...]
committed = {}  # key -> highest committed offset


def apply(msg):
    body = msg["body"]
    t = body["type"]
    if t == "send":
        log = logs.setdefault(body["key"], [])
        log.append(body["msg"])
        node.reply(msg, {"type": "send_ok", "offset": len(log) - 1})
    elif t == "poll":
        out = {}
        for key, start in body.get("offsets", {}).items():
            log = logs.get(key, [])
            start = max(0, int(start))
            entries = [[o, log[o]] for o in range(start, min(len(log), start + POLL_LIMIT))]
            if entries:
                out[key] = entries
        node.reply(msg, {"type": "poll_ok", "msgs": out})
    elif t == "commit_offsets":
        for key, o in body.get("offsets", {}).items():
            committed[key] = max(committed.get(key, -1), int(o))
        node.reply(msg, {"type": "commit_offsets_ok"})
    elif t == "list_committed_offsets":
        out = {k: committed[k] for k in body.get("keys", []) if k in committed}
        node.reply(msg, {"type": "list_committed_offsets_ok", "offsets": out})


def handle(msg):
    leader = node.node_ids[0]
    if node.node_id == leader:
        apply(msg)
    else:
        node.forward(msg, leader, FORWARD_TIMEOUT)


for t in ("send", "poll", "commit_offsets", "list_committed_offsets"):
    node.on(t, handle)

node.run()
