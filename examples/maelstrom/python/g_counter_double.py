#!/usr/bin/env python3
"""g-counter / pn-counter workloads. BUG "double-counts on retry".

Op-based: an add is applied locally, acked, and sent as a delta message
to every other node, resent every 60 ms until that node acks it. The
receiver applies EVERY delta message it gets (it does not remember which
ops it already applied), so whenever an ack is slow (network delay above
~30 ms each way, a paused node) or lost (random loss, a partition
dropping the ack), the retry is applied a second (third, ...) time and the
final reads exceed the sum of all deltas. Looks correct on a fast,
lossless network.
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()
RETRY_AFTER = 0.06
total = 0
op_counter = 0
pending = {}  # (peer, op) -> [delta, last_sent]


@node.handler("add")
def add(msg):
    global total, op_counter
    delta = msg["body"]["delta"]
    if not isinstance(delta, int) or isinstance(delta, bool):
        node.error(msg, 12, "delta must be an integer")
        return
    total += delta
    now = time.monotonic()
    for peer in node.other_nodes():
        op_counter += 1
        pending[(peer, op_counter)] = [delta, now]
        send_delta(peer, op_counter, delta)
    node.reply(msg, {"type": "add_ok"})


def send_delta(peer, op, delta):
    node.send(peer, {"type": "delta", "op": op, "delta": delta,
                     "msg_id": node.new_msg_id()})


@node.handler("delta")
def on_delta(msg):
    global total
    total += msg["body"]["delta"]  # BUG: no dedup by op id
    node.reply(msg, {"type": "delta_ok", "op": msg["body"]["op"]})


@node.handler("delta_ok")
def on_delta_ok(msg):
    pending.pop((msg["src"], msg["body"]["op"]), None)


@node.handler("read")
def read(msg):
    node.reply(msg, {"type": "read_ok", "value": total})


@node.periodic(0.01)
def retry():
    now = time.monotonic()
    for (peer, op), entry in pending.items():
        if now - entry[1] >= RETRY_AFTER:
            entry[1] = now
            send_delta(peer, op, entry[0])


node.run()
