#!/usr/bin/env python3
"""echo workload: answer every echo with the same payload. Correct."""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the examples
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from maelstrom import Node  # noqa: E402

node = Node()


@node.handler("echo")
def echo(msg):
    node.reply(msg, {"type": "echo_ok", "echo": msg["body"].get("echo")})


node.run()
