#!/usr/bin/env bash
# (Re)loads a sample database into the local MariaDB as root. Repeatable: the database is dropped first.
#
#   infra/load_dataset.sh inventory|sakila [--port N]
#
#   inventory : $CDC_DATASETS_DIR/inventory/inventory.sql            (creates database `inventory`)
#   sakila    : $CDC_DATASETS_DIR/sakila/sakila-schema.sql, then sakila-data.sql   (database `sakila`)
# Connects to 127.0.0.1:$CDC_MYSQL_PORT (or --port) as root with $CDC_MYSQL_ROOT_PASSWORD.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
DATASET="${1:-}"
[ -n "$DATASET" ] || usage
shift
PORT="$CDC_MYSQL_PORT"
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT="${2:?--port needs a value}"; shift 2 ;;
    --port=*) PORT="${1#*=}"; shift ;;
    *) usage ;;
  esac
done

case "$DATASET" in
  inventory) DB=inventory; FILES=("$CDC_DATASETS_DIR/inventory/inventory.sql") ;;
  sakila) DB=sakila; FILES=("$CDC_DATASETS_DIR/sakila/sakila-schema.sql" "$CDC_DATASETS_DIR/sakila/sakila-data.sql") ;;
  *) echo "[load_dataset] ERROR: unknown dataset '$DATASET' (inventory or sakila)" >&2; exit 2 ;;
esac
for f in "${FILES[@]}"; do
  [ -r "$f" ] || { echo "[load_dataset] ERROR: $f not found (CDC_DATASETS_DIR=$CDC_DATASETS_DIR)" >&2; exit 1; }
done

sql() {
  MYSQL_PWD="$CDC_MYSQL_ROOT_PASSWORD" timeout "${CDC_LOAD_TIMEOUT:-900}" mariadb --no-defaults --protocol=TCP \
    -h"$CDC_MYSQL_HOST" -P"$PORT" -uroot --connect-timeout=10 --default-character-set=utf8mb4 --batch "$@"
}

if ! sql -e "SELECT 1" >/dev/null; then
  echo "[load_dataset] ERROR: cannot connect to MariaDB at $CDC_MYSQL_HOST:$PORT as root (is it up? run infra/up.sh)" >&2
  exit 1
fi
echo "[load_dataset] loading '$DATASET' into $CDC_MYSQL_HOST:$PORT"
sql -e "DROP DATABASE IF EXISTS \`$DB\`"
for f in "${FILES[@]}"; do
  echo "[load_dataset]   < $f"
  if ! sql <"$f"; then
    echo "[load_dataset] ERROR: loading $f into $CDC_MYSQL_HOST:$PORT failed" >&2
    exit 1
  fi
done
echo "[load_dataset] '$DB' loaded; row counts:"
sql --skip-column-names -e "SELECT table_name FROM information_schema.tables
  WHERE table_schema='$DB' AND table_type='BASE TABLE' ORDER BY table_name" | while read -r t; do
  printf '  %-24s %s\n' "$t" "$(sql --skip-column-names -e "SELECT COUNT(*) FROM \`$DB\`.\`$t\`")"
done
