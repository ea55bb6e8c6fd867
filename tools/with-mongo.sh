#!/usr/bin/env bash
# Run a command with the MongoDB-wire test server up, and export its URI.
#   tools/with-mongo.sh CMD ARGS...
# If FLOWSCHED_MONGO_URI is already set (a real MongoDB), nothing is started.
# Otherwise the server is started unless something already answers on the port, and it is
# stopped afterwards only if this script started it (so parallel checkouts can share one).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -n "${FLOWSCHED_MONGO_URI:-}" ]; then exec "$@"; fi
export MONGO_HOME="${MONGO_HOME:-/tmp/flowsched-mongo}"
export MONGO_PORT="${MONGO_PORT:-27017}"
# The script's words are printed either way: a server that cannot start says why.
out="$(bash "$here/start-mongo.sh")" || { echo "$out" >&2; exit 1; }
echo "$out"
started=0
case "$out" in started*) started=1 ;; esac
export FLOWSCHED_MONGO_URI="mongodb://127.0.0.1:${MONGO_PORT}/?directConnection=true&retryWrites=false"
export FLOWSCHED_MONGO_SCRIPT="$here/start-mongo.sh"
set +e
"$@"
rc=$?
set -e
if [ "$started" = 1 ]; then bash "$here/start-mongo.sh" stop >/dev/null || true; fi
exit $rc
