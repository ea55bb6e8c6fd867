#!/usr/bin/env bash
# Run a command with a PostgreSQL test server up, and export its URL.
#   tools/with-postgres.sh CMD ARGS...
# If FLOWSCHED_POSTGRES_URL is already set (an existing server), nothing is started.
# Otherwise tools/start-postgres.sh starts the server of PG_HOME (default /tmp/flowsched-pg),
# or reuses it when it already runs; it is stopped afterwards only if this script started it
# (so parallel checkouts and nested runs can share one).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -n "${FLOWSCHED_POSTGRES_URL:-}" ]; then exec "$@"; fi
export PG_HOME="${PG_HOME:-/tmp/flowsched-pg}"
# start-postgres.sh prints the URL on stdout and its progress on stderr: "started pid ..."
# there means this call started the server (a reused one says nothing of the kind).
err="$(mktemp)"
trap 'rm -f "$err"' EXIT
if ! url="$(bash "$here/start-postgres.sh" 2>"$err")"; then
  cat "$err" >&2
  exit 1
fi
cat "$err" >&2
started=0
grep -q 'start-postgres: started pid' "$err" && started=1
export FLOWSCHED_POSTGRES_URL="${url##*$'\n'}"
echo "PostgreSQL test server: $FLOWSCHED_POSTGRES_URL"
set +e
"$@"
rc=$?
set -e
if [ "$started" = 1 ]; then bash "$here/start-postgres.sh" stop 2>/dev/null || true; fi
exit $rc
