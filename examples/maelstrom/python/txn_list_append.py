#!/usr/bin/env python3
"""txn-list-append workload. Correct: single leader, strict serializable.

The leader (n0, the first of node_ids) holds every list and executes each
whole transaction at once, one transaction at a time, so transactions
take effect in a single serial order that respects real time. Every other
node forwards the transaction to the leader and relays the answer; no
answer within 1 s gives error 0 (timeout, indefinite). A read of a key
that was never appended to returns null.

Limits: in memory on the leader, so killing the leader loses the data.
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node, key_of  # noqa: E402

node = Node()
FORWARD_TIMEOUT = 1.0
lists = {}  # canonical key -> list


@node.handler("txn")
def txn(msg):
    leader = node.node_ids[0]
    if node.node_id != leader:
        node.forward(msg, leader, FORWARD_TIMEOUT)
        return
    ops = msg["body"]["txn"]
    # Validate first so a malformed txn is rejected as a whole, never half-applied.
    for op in ops:
        if (not isinstance(op, list) or len(op) != 3
                or op[0] not in ("r", "append")):
            node.error(msg, 12, "bad micro-op %r" % (op,))
            return
    result = []
    for f, k, v in ops:
        kk = key_of(k)
        if f == "r":
            cur = lists.get(kk)
            result.append(["r", k, list(cur) if cur is not None else None])
        else:
            lists.setdefault(kk, []).append(v)
            result.append(["append", k, v])
    node.reply(msg, {"type": "txn_ok", "txn": result})


node.run()
