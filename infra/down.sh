#!/usr/bin/env bash
# Stops every local service started by infra/: all MariaDB instances under $CDC_INFRA_DIR,
# SeaweedFS and the Spark Connect server. Data is kept (make clean removes it). Idempotent.
set -euo pipefail
HERE="$(dirname "${BASH_SOURCE[0]}")"
. "$HERE/env.sh"

rc=0
# SeaweedFS needs ~17 s to stop (its filer waits 15 s for gRPC streams): stop it in parallel.
bash "$HERE/seaweedfs.sh" stop &
weed_stop=$!
if [ -d "$CDC_INFRA_DIR" ]; then
  for d in "$CDC_INFRA_DIR"/mariadb-*/; do
    [ -d "$d" ] || continue
    name="$(basename "$d")"
    name="${name#mariadb-}"
    bash "$HERE/mariadb.sh" stop --instance "$name" || rc=1
  done
fi
bash "$HERE/spark_connect.sh" stop || rc=1
wait "$weed_stop" || rc=1
[ "$rc" -eq 0 ] || echo "[down] ERROR: some services could not be stopped (see above)" >&2
exit "$rc"
