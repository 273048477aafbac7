#!/usr/bin/env bash
# The KV store's proof matrix; see scripts/matrix.sh. Usage: scripts/kv-matrix.sh [SECONDS] [SEEDS...]
exec "$(dirname "$0")/matrix.sh" kv "$@"
