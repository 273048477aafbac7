#!/usr/bin/env python3
"""lin-kv workload. Correct: a stateless proxy to the harness's lin-kv
service.

Every read, write and cas is sent, unchanged, to the `lin-kv` service and
its answer (read_ok / write_ok / cas_ok / error 20 / error 22 / ...) is
relayed to the client. No answer within 1 s gives error 0 (timeout,
indefinite). Because the node holds no state, it stays correct under
kills and restarts as well as partitions (unlike lin_kv.py, whose leader
keeps the map in memory).
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()
SERVICE = "lin-kv"
TIMEOUT = 1.0


def proxy(msg):
    node.forward(msg, SERVICE, TIMEOUT)


for t in ("read", "write", "cas"):
    node.on(t, proxy)

node.run()
