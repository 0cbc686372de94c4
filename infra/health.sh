#!/usr/bin/env bash
# One line per local service; exit status non-zero if any of them is down.
set -euo pipefail
HERE="$(dirname "${BASH_SOURCE[0]}")"
. "$HERE/env.sh"

rc=0
bash "$HERE/mariadb.sh" status --instance main || rc=1
bash "$HERE/seaweedfs.sh" status || rc=1
if [ "${CDC_SPARK_CONNECT:-1}" != "0" ]; then
  bash "$HERE/spark_connect.sh" status || rc=1
fi
if [ "$rc" -ne 0 ]; then
  echo "[health] some services are down (logs in $CDC_INFRA_DIR/*/; start them with infra/up.sh)" >&2
fi
exit "$rc"
