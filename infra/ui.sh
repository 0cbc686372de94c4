#!/usr/bin/env bash
# The inventory example in the Dagster UI: `dagster dev` on definitions.py with the CDC sensor on.
#
#   infra/ui.sh            (make ui: also starts MariaDB + SeaweedFS and loads inventory first)
#
# Serves http://$CDC_UI_HOST:$CDC_UI_PORT (default 127.0.0.1:3000) in the foreground; Ctrl-C stops it.
# DAGSTER_HOME defaults to .infra/dagster-home (runs, sensor cursors and event logs persist there).
# Once the webserver answers, the binlog sensor (dbserver1_cdc_binlog_sensor), the rotating
# verification (dbserver1_cdc_binlog_sensor_verification) and the automation sensor of the
# downstream asset are switched on, as a user would in Automation.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$CDC_ROOT"

export DAGSTER_HOME="${DAGSTER_HOME:-$CDC_INFRA_DIR/dagster-home}"
mkdir -p "$DAGSTER_HOME"
# dequeue queued runs every second (default 5 s): a window run starts seconds after its request
[ -f "$DAGSTER_HOME/dagster.yaml" ] ||
  printf 'telemetry:\n  enabled: false\nrun_queue:\n  dequeue_interval_seconds: 1\n' >"$DAGSTER_HOME/dagster.yaml"
HOST="${CDC_UI_HOST:-127.0.0.1}"
PORT="${CDC_UI_PORT:-3000}"
SENSORS=(dbserver1_cdc_binlog_sensor dbserver1_cdc_binlog_sensor_verification default_automation_condition_sensor)
DAGSTER=("$CDC_ROOT/.venv/bin/dagster")
[ -x "${DAGSTER[0]}" ] || DAGSTER=(dagster)

start_sensors() {
  for _ in $(seq 1 180); do
    if "$CDC_PYTHON" - "$HOST" "$PORT" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(f"http://{sys.argv[1]}:{sys.argv[2]}/server_info", timeout=2)
PY
    then
      for s in "${SENSORS[@]}"; do
        if "${DAGSTER[@]}" sensor start "$s" -f definitions.py >/dev/null 2>&1; then
          echo "[ui] sensor $s is on"
        else
          echo "[ui] could not start sensor $s (start it under Automation)" >&2
        fi
      done
      echo "[ui] open http://$HOST:$PORT  (Assets: dbserver1/inventory/*, Automation: the sensors, Runs)"
      return 0
    fi
    sleep 1
  done
  echo "[ui] the webserver did not answer on http://$HOST:$PORT within 180 s" >&2
}

# the signal table (inventory.debezium_signal): incremental snapshots, and the repairs the checks
# and the rotating verification queue, are signals written to it (created if absent)
"$CDC_PYTHON" -c 'from definitions import mysql; print("[ui] signal table", mysql.create_signal_table())'
echo "[ui] dagster dev -f definitions.py on http://$HOST:$PORT (DAGSTER_HOME=$DAGSTER_HOME); Ctrl-C stops it"
start_sensors &
exec "${DAGSTER[@]}" dev -f definitions.py -h "$HOST" -p "$PORT"
