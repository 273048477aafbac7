#!/usr/bin/env python3
"""unique-ids workload. Correct: an id is node id + a random nonce drawn at
process start + a counter, so ids differ across nodes, across restarts of
one node (fresh nonce) and within one process (counter). No coordination."""
import os
import secrets
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()
BOOT = secrets.token_hex(8)  # 64 random bits per process
counter = 0


@node.handler("generate")
def generate(msg):
    global counter
    counter += 1
    node.reply(msg, {"type": "generate_ok",
                     "id": "%s-%s-%d" % (node.node_id, BOOT, counter)})


node.run()
