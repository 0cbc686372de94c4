#!/usr/bin/env bash
# Local, unprivileged-path MariaDB instances for development and tests.
#
#   infra/mariadb.sh start|stop|status|restart [--instance NAME] [--port N]
#                    [--no-log-bin | --log-bin] [--binlog-format ROW|MIXED|STATEMENT] [--server-id N]
#                    [--tls] [--replica-of PORT [--gtid-domain-id N] [--binlog-start N]]
#   infra/mariadb.sh promote --instance NAME
#
# Instance NAME (default "main") lives in $CDC_INFRA_DIR/mariadb-NAME/ (my.cnf, data/, binlog/,
# mariadbd.err, mariadbd.pid, socket). The "main" instance listens on $CDC_MYSQL_PORT; another
# instance keeps the port/binlog settings it was last started with unless flags are given.
# On first start the server is initialised, root@localhost/root@127.0.0.1 get
# $CDC_MYSQL_ROOT_PASSWORD and $CDC_MYSQL_USER@{%,localhost,127.0.0.1} is created with the
# privileges a CDC reader needs.
#   start   : no-op success when the instance already answers
#   stop    : graceful (mariadb-admin shutdown, then SIGTERM/SIGKILL), bounded
#   status  : exit 0 iff the server answers on its port
# --tls: the instance serves TLS only (require_secure_transport=ON) with certificates made by openssl
# on first start in mariadb-NAME/tls/: ca.pem (the CA to trust: ssl_ca), server-cert.pem for
# DNS name "localhost" only (so verify_identity passes for host=localhost and fails for 127.0.0.1),
# client-cert.pem/client-key.pem (a client certificate).
# --replica-of PORT: on first start the instance becomes a GTID replica of the instance on
# 127.0.0.1:PORT (CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos, log_slave_updates=ON, read_only):
# its user databases (tables and triggers; not routines or events) are copied with mariadb-dump
# --gtid (not logged), its gtid_domain_id is --gtid-domain-id (default: its --server-id, so writes
# after a promotion are told apart) and its binlog numbering starts at --binlog-start (default: the
# primary's current file number + 1000, RESET MASTER TO n) so the two servers' file names are told
# apart (no longer required: the capture's offset epoch orders a promoted replica's positions after
# the old primary's whatever their numbering, see docs/operations.md, "Failover"). Give it a
# distinct --port (CDC_MYSQL_REPLICA_PORT); without --server-id it takes one above the primary's and
# its replicas' (the primary's server_id is refused). It is reported "up" only once its IO and
# SQL threads run (else the replication error is printed and the start fails).
#   promote : STOP SLAVE; RESET SLAVE ALL; read_only=OFF (the replica becomes a primary)
# Tunables: CDC_MARIADB_START_TIMEOUT (s, default 60), CDC_MARIADB_STOP_TIMEOUT (s, default 60).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

usage() {
  sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

CMD="${1:-}"
[ -n "$CMD" ] || usage
shift
NAME=main
ARG_PORT="" ARG_LOG_BIN="" ARG_FORMAT="" ARG_SERVER_ID="" ARG_TLS=""
ARG_REPLICA_OF="" ARG_DOMAIN_ID="" ARG_BINLOG_START=""
while [ $# -gt 0 ]; do
  case "$1" in
    --instance) NAME="${2:?--instance needs a value}"; shift 2 ;;
    --instance=*) NAME="${1#*=}"; shift ;;
    --port) ARG_PORT="${2:?--port needs a value}"; shift 2 ;;
    --port=*) ARG_PORT="${1#*=}"; shift ;;
    --no-log-bin) ARG_LOG_BIN=0; shift ;;
    --log-bin) ARG_LOG_BIN=1; shift ;;
    --binlog-format) ARG_FORMAT="${2:?--binlog-format needs a value}"; shift 2 ;;
    --binlog-format=*) ARG_FORMAT="${1#*=}"; shift ;;
    --server-id) ARG_SERVER_ID="${2:?--server-id needs a value}"; shift 2 ;;
    --server-id=*) ARG_SERVER_ID="${1#*=}"; shift ;;
    --tls) ARG_TLS=1; shift ;;
    --replica-of) ARG_REPLICA_OF="${2:?--replica-of needs a port}"; shift 2 ;;
    --replica-of=*) ARG_REPLICA_OF="${1#*=}"; shift ;;
    --gtid-domain-id) ARG_DOMAIN_ID="${2:?--gtid-domain-id needs a value}"; shift 2 ;;
    --gtid-domain-id=*) ARG_DOMAIN_ID="${1#*=}"; shift ;;
    --binlog-start) ARG_BINLOG_START="${2:?--binlog-start needs a value}"; shift 2 ;;
    --binlog-start=*) ARG_BINLOG_START="${1#*=}"; shift ;;
    -h|--help) usage ;;
    *) echo "mariadb.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$NAME" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "mariadb.sh: bad instance name '$NAME'" >&2; exit 2; }

TAG="mariadb[$NAME]"
say() { echo "[$TAG] $*"; }
err() { echo "[$TAG] ERROR: $*" >&2; }

DIR="$CDC_INFRA_DIR/mariadb-$NAME"
CNF="$DIR/my.cnf"
DATA="$DIR/data"
BINLOG_DIR="$DIR/binlog"
PIDFILE="$DIR/mariadbd.pid"
LAUNCH_PIDFILE="$DIR/mariadbd.launch.pid"
ERRLOG="$DIR/mariadbd.err"
OUTLOG="$DIR/mariadbd.out"
INSTALL_LOG="$DIR/install-db.log"
SETTINGS="$DIR/instance.env"
INIT_MARK="$DIR/.initialized"
SOCK="$DIR/mariadbd.sock"
if [ "${#SOCK}" -gt 100 ]; then # unix socket paths are limited to 108 bytes
  SOCK="/tmp/cdc-mariadb-$(printf %s "$DIR" | sha1sum | cut -c1-12).sock"
fi

# ---- settings: flag > saved (non-main instances, and stop/status) > defaults ----------------------
SAVED_PORT="" SAVED_LOG_BIN="" SAVED_FORMAT="" SAVED_SERVER_ID="" SAVED_TLS=""
SAVED_REPLICA_OF="" SAVED_DOMAIN_ID=""
if [ -f "$SETTINGS" ]; then
  SAVED_REPLICA_OF="$(sed -n 's/^REPLICA_OF=//p' "$SETTINGS")"
  SAVED_DOMAIN_ID="$(sed -n 's/^DOMAIN_ID=//p' "$SETTINGS")"
  SAVED_TLS="$(sed -n 's/^TLS=//p' "$SETTINGS")"
  SAVED_PORT="$(sed -n 's/^PORT=//p' "$SETTINGS")"
  SAVED_LOG_BIN="$(sed -n 's/^LOG_BIN=//p' "$SETTINGS")"
  SAVED_FORMAT="$(sed -n 's/^BINLOG_FORMAT=//p' "$SETTINGS")"
  SAVED_SERVER_ID="$(sed -n 's/^SERVER_ID=//p' "$SETTINGS")"
fi
case "$CMD" in
  start|restart)
    if [ "$NAME" = main ]; then PORT="${ARG_PORT:-$CDC_MYSQL_PORT}"
    else PORT="${ARG_PORT:-${SAVED_PORT:-$CDC_MYSQL_PORT}}"; fi ;;
  *) PORT="${ARG_PORT:-${SAVED_PORT:-$([ "$NAME" = main ] && echo "$CDC_MYSQL_PORT" || echo "")}}" ;;
esac
LOG_BIN="${ARG_LOG_BIN:-${SAVED_LOG_BIN:-1}}"
BINLOG_FORMAT="${ARG_FORMAT:-${SAVED_FORMAT:-ROW}}"
BINLOG_FORMAT="$(printf %s "$BINLOG_FORMAT" | tr '[:lower:]' '[:upper:]')"
SERVER_ID="${ARG_SERVER_ID:-${SAVED_SERVER_ID:-1}}"
TLS="${ARG_TLS:-${SAVED_TLS:-0}}"
REPLICA_OF="${ARG_REPLICA_OF:-$SAVED_REPLICA_OF}"
DOMAIN_ID="${ARG_DOMAIN_ID:-${SAVED_DOMAIN_ID:-$([ -n "$REPLICA_OF" ] && echo "$SERVER_ID" || echo 0)}}"
REPLICA_MARK="$DIR/.replica-configured"
TLS_DIR="$DIR/tls"
# TCP clients of a --tls instance must speak TLS (require_secure_transport); the socket needs none
CLIENT_TLS=()
[ "$TLS" = 1 ] && CLIENT_TLS=(--ssl)
case "$BINLOG_FORMAT" in ROW|MIXED|STATEMENT) ;; *) err "bad --binlog-format '$BINLOG_FORMAT' (ROW, MIXED or STATEMENT)"; exit 2 ;; esac
[[ -z "$PORT" || "$PORT" =~ ^[0-9]+$ ]] || { err "bad port '$PORT'"; exit 2; }
[[ "$SERVER_ID" =~ ^[0-9]+$ ]] || { err "bad --server-id '$SERVER_ID'"; exit 2; }
[[ -z "$REPLICA_OF" || "$REPLICA_OF" =~ ^[0-9]+$ ]] || { err "bad --replica-of '$REPLICA_OF' (a port)"; exit 2; }
[[ "$DOMAIN_ID" =~ ^[0-9]+$ ]] || { err "bad --gtid-domain-id '$DOMAIN_ID'"; exit 2; }
[[ -z "$ARG_BINLOG_START" || "$ARG_BINLOG_START" =~ ^[0-9]+$ ]] || { err "bad --binlog-start '$ARG_BINLOG_START'"; exit 2; }
if [ -n "$REPLICA_OF" ] && [ "$REPLICA_OF" = "$PORT" ]; then err "--replica-of $REPLICA_OF is this instance's own port"; exit 2; fi

# ---- helpers ----------------------------------------------------------------------------------------
show_logs() {
  local f
  for f in "$ERRLOG" "$OUTLOG" "$@"; do
    if [ -s "$f" ]; then
      echo "----- last 30 lines of $f -----" >&2
      tail -n 30 "$f" >&2
      echo "-----" >&2
    fi
  done
}

sql_str() { # SQL single-quoted string literal
  local s="${1//\\/\\\\}"
  s="${s//\'/\\\'}"
  printf "'%s'" "$s"
}

server_pid() { # prints the pid of this instance's mariadbd if it is alive
  local f pid
  for f in "$PIDFILE" "$LAUNCH_PIDFILE"; do
    [ -s "$f" ] || continue
    pid="$(tr -dc '0-9' <"$f")"
    [ -n "$pid" ] || continue
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "--defaults-file=$CNF"; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

# mariadb-admin ping exits 0 whenever the server answers (even "access denied")
ping_tcp() {
  [ -n "$PORT" ] || return 1
  MYSQL_PWD="$CDC_MYSQL_ROOT_PASSWORD" timeout 10 mariadb-admin --no-defaults "${CLIENT_TLS[@]}" --protocol=TCP \
    -h127.0.0.1 -P"$PORT" -uroot --connect-timeout=3 ping >/dev/null 2>&1
}

port_in_use() { timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

root_sql_tcp() { # run SQL from stdin as root over TCP
  MYSQL_PWD="$CDC_MYSQL_ROOT_PASSWORD" timeout 60 mariadb --no-defaults "${CLIENT_TLS[@]}" --protocol=TCP \
    -h127.0.0.1 -P"$PORT" -uroot --connect-timeout=5 --batch --skip-column-names "$@"
}

write_cnf() { # writes the config to $1
  {
    echo "# generated by infra/mariadb.sh (instance $NAME) - edits are overwritten on start"
    echo "[mysqld]"
    echo "bind-address=127.0.0.1"
    echo "port=$PORT"
    echo "socket=$SOCK"
    echo "datadir=$DATA"
    echo "pid-file=$PIDFILE"
    echo "log-error=$ERRLOG"
    if [ "$LOG_BIN" = 1 ]; then
      echo "log_bin=$BINLOG_DIR/mysql-bin"
    else
      echo "skip-log-bin"
    fi
    echo "binlog_format=$BINLOG_FORMAT"
    echo "binlog_row_image=FULL"
    echo "binlog_row_metadata=FULL"
    echo "binlog_annotate_row_events=ON"
    echo "server_id=$SERVER_ID"
    [ "$DOMAIN_ID" = 0 ] || echo "gtid_domain_id=$DOMAIN_ID"
    echo "log_slave_updates=ON"
    echo "gtid_strict_mode=ON"
    echo "character-set-server=utf8mb4"
    echo "collation-server=utf8mb4_general_ci"
    echo "default-time-zone='+00:00'"
    echo "max_allowed_packet=256M"
    echo "innodb_buffer_pool_size=256M"
    echo "skip-name-resolve"
    if [ "$TLS" = 1 ]; then
      echo "ssl_ca=$TLS_DIR/ca.pem"
      echo "ssl_cert=$TLS_DIR/server-cert.pem"
      echo "ssl_key=$TLS_DIR/server-key.pem"
      echo "require_secure_transport=ON"
    fi
    echo
    echo "[client]"
    echo "socket=$SOCK"
    echo "port=$PORT"
    echo "host=127.0.0.1"
  } >"$1"
}

make_tls_certs() { # CA, server (localhost/127.0.0.1) and client certificates, once per instance
  [ -s "$TLS_DIR/server-cert.pem" ] && return 0
  command -v openssl >/dev/null 2>&1 || { err "--tls needs openssl (apt-get install openssl)"; exit 1; }
  mkdir -p "$TLS_DIR"
  (
    cd "$TLS_DIR"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=dagster-mysql-cdc test CA" \
      -keyout ca-key.pem -out ca.pem
    printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n' >server.ext
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server-key.pem -out server.csr
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
      -extfile server.ext -out server-cert.pem
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$CDC_MYSQL_USER" -keyout client-key.pem -out client.csr
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 -out client-cert.pem
    rm -f server.csr client.csr server.ext
  ) >"$DIR/tls.log" 2>&1 || { err "making TLS certificates failed (log: $DIR/tls.log)"; exit 1; }
  say "TLS certificates in $TLS_DIR (trust ca.pem)"
}

first_init_sql() {
  local rp up
  rp="$(sql_str "$CDC_MYSQL_ROOT_PASSWORD")"
  up="$(sql_str "$CDC_MYSQL_PASSWORD")"
  local u="$CDC_MYSQL_USER"
  [[ "$u" =~ ^[A-Za-z0-9_.-]+$ ]] || { err "CDC_MYSQL_USER '$u' has unsupported characters"; exit 2; }
  cat <<SQL
SET SESSION sql_log_bin=0;
ALTER USER 'root'@'localhost' IDENTIFIED BY $rp;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY $rp;
ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY $rp;
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'root'@'::1' IDENTIFIED BY $rp;
ALTER USER 'root'@'::1' IDENTIFIED BY $rp;
GRANT ALL PRIVILEGES ON *.* TO 'root'@'::1' WITH GRANT OPTION;
DROP USER IF EXISTS ''@'localhost';
SQL
  # mariadb-install-db also creates root@<hostname> (no password) and maybe ''@<hostname>: drop them
  local hn
  hn="$(hostname 2>/dev/null || true)"
  if [ -n "$hn" ] && [[ "$hn" =~ ^[A-Za-z0-9_.-]+$ ]] && [ "$hn" != localhost ] && [ "$hn" != 127.0.0.1 ]; then
    echo "DROP USER IF EXISTS 'root'@'$hn';"
    echo "DROP USER IF EXISTS ''@'$hn';"
  fi
  local h
  for h in '%' localhost 127.0.0.1; do
    cat <<SQL
CREATE USER IF NOT EXISTS '$u'@'$h' IDENTIFIED BY $up;
ALTER USER '$u'@'$h' IDENTIFIED BY $up;
GRANT SELECT, RELOAD, LOCK TABLES, REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN, SLAVE MONITOR, SHOW DATABASES, INSERT, UPDATE, DELETE, CREATE ON *.* TO '$u'@'$h';
SQL
  done
  echo "FLUSH PRIVILEGES;"
}

# ---- commands -------------------------------------------------------------------------------------
do_status() {
  local pid=""
  pid="$(server_pid || true)"
  if ping_tcp; then
    if [ -n "$pid" ]; then
      say "up on 127.0.0.1:$PORT (pid $pid, dir $DIR)"
    else
      say "something answers on 127.0.0.1:$PORT, but no mariadbd of $DIR is running"
    fi
    return 0
  fi
  if [ -n "$pid" ]; then
    say "DOWN: mariadbd pid $pid is running but does not answer on 127.0.0.1:${PORT:-?} (log: $ERRLOG)"
  elif [ -d "$DIR" ]; then
    say "down (not running; dir $DIR)"
  else
    say "down (no instance at $DIR)"
  fi
  return 1
}

replica_server_id() { # --replica-of: a server_id distinct from the primary's and its other replicas'
  local primary_id used id log="$DIR/replica-server-id.log"
  primary_id="$(echo "SELECT @@server_id" | primary_sql 2>"$log")" \
    || { err "the primary 127.0.0.1:$REPLICA_OF does not answer as root: $(cat "$log")"; exit 1; }
  used="$( (echo "$primary_id"; echo "SHOW SLAVE HOSTS" | primary_sql 2>/dev/null | awk '{print $1}') | sort -n | uniq)"
  if [ -n "$ARG_SERVER_ID" ] || [ -n "$SAVED_SERVER_ID" ]; then
    # the primary's own id stops replication at once; SHOW SLAVE HOSTS may still list a replica
    # that was just removed (the same instance re-created), so only the primary's id is refused
    if [ "$SERVER_ID" = "$primary_id" ]; then
      err "--server-id $SERVER_ID is the server_id of the primary 127.0.0.1:$REPLICA_OF: a replica needs its own server_id (replication stops at once otherwise); pass another --server-id, or none to pick a free one"
      exit 2
    fi
    return 0
  fi
  id=$(( $(printf '%s\n' "$used" | tail -n1) + 1 ))
  SERVER_ID="$id"
  DOMAIN_ID="${ARG_DOMAIN_ID:-${SAVED_DOMAIN_ID:-$SERVER_ID}}"
  say "no --server-id given: using $SERVER_ID (the primary and its replicas use: $(echo $used))"
}

wait_replica_threads() { # a replica is "up" only when its IO and SQL threads run
  local deadline io sql status
  deadline=$((SECONDS + ${CDC_MARIADB_START_TIMEOUT:-60}))
  while :; do
    status="$(echo "SHOW SLAVE STATUS\G" | root_sql_tcp --column-names 2>/dev/null || true)"
    io="$(printf '%s\n' "$status" | sed -n 's/^ *Slave_IO_Running: //p')"
    sql="$(printf '%s\n' "$status" | sed -n 's/^ *Slave_SQL_Running: //p')"
    [ "$io" = Yes ] && [ "$sql" = Yes ] && return 0
    if [ "$SECONDS" -ge "$deadline" ] || { [ "$io" = No ] && [ -n "$(printf '%s\n' "$status" | sed -n 's/^ *Last_IO_Error: \(..*\)/\1/p')" ]; } \
       || { [ "$sql" = No ] && [ -n "$(printf '%s\n' "$status" | sed -n 's/^ *Last_SQL_Error: \(..*\)/\1/p')" ]; }; then
      err "replication from 127.0.0.1:$REPLICA_OF is not running (Slave_IO_Running=${io:-?}, Slave_SQL_Running=${sql:-?}):"
      printf '%s\n' "$status" | grep -E '^ *(Last_IO_Error|Last_SQL_Error): .' >&2 || true
      exit 1
    fi
    sleep 0.5
  done
}

do_start() {
  local pid timeout_s deadline tmp
  timeout_s="${CDC_MARIADB_START_TIMEOUT:-60}"
  command -v mariadbd >/dev/null 2>&1 || { err "mariadbd not found (run infra/install.sh)"; exit 1; }
  command -v mariadb-install-db >/dev/null 2>&1 || { err "mariadb-install-db not found (run infra/install.sh)"; exit 1; }
  mkdir -p "$DIR" "$BINLOG_DIR"
  if [ -n "$REPLICA_OF" ] && [ ! -e "$REPLICA_MARK" ]; then replica_server_id; fi

  [ "$TLS" = 1 ] && make_tls_certs
  tmp="$DIR/my.cnf.new"
  write_cnf "$tmp"

  if pid="$(server_pid)"; then
    if ! cmp -s "$tmp" "$CNF"; then
      say "note: running with an older config; use 'restart' to apply the new settings"
    fi
    rm -f "$tmp"
    deadline=$((SECONDS + timeout_s))
    until ping_tcp; do
      if [ "$SECONDS" -ge "$deadline" ]; then
        err "mariadbd (pid $pid) is running but did not answer on 127.0.0.1:$PORT within ${timeout_s}s (log: $ERRLOG)"
        show_logs; exit 1
      fi
      kill -0 "$pid" 2>/dev/null || { err "mariadbd (pid $pid) exited while starting (log: $ERRLOG)"; show_logs; exit 1; }
      sleep 1
    done
    say "already running on 127.0.0.1:$PORT (pid $pid)"
    return 0
  fi

  if port_in_use "$PORT"; then
    rm -f "$tmp"
    err "port 127.0.0.1:$PORT is already in use by another process; pick another with --port or CDC_MYSQL_PORT"
    exit 1
  fi
  mv -f "$tmp" "$CNF"
  printf 'PORT=%s\nLOG_BIN=%s\nBINLOG_FORMAT=%s\nSERVER_ID=%s\nTLS=%s\nREPLICA_OF=%s\nDOMAIN_ID=%s\n' "$PORT" "$LOG_BIN" \
    "$BINLOG_FORMAT" "$SERVER_ID" "$TLS" "$REPLICA_OF" "$DOMAIN_ID" >"$SETTINGS"
  rm -f "$PIDFILE" "$LAUNCH_PIDFILE"

  if [ ! -d "$DATA/mysql" ]; then
    if [ -e "$INIT_MARK" ]; then
      err "$INIT_MARK exists but $DATA/mysql is missing: the data dir was damaged; remove $DIR to re-create the instance"
      exit 1
    fi
    say "initialising a new data dir in $DATA"
    rm -rf "$DATA"
    mkdir -p "$DATA"
    if ! timeout 300 mariadb-install-db --defaults-file="$CNF" --user=root --datadir="$DATA" \
        --auth-root-authentication-method=normal --skip-test-db >"$INSTALL_LOG" 2>&1 </dev/null; then
      err "mariadb-install-db failed (log: $INSTALL_LOG)"
      show_logs "$INSTALL_LOG"
      rm -rf "$DATA"
      exit 1
    fi
  fi

  say "starting mariadbd on 127.0.0.1:$PORT (binlog: $([ "$LOG_BIN" = 1 ] && echo "$BINLOG_FORMAT in $BINLOG_DIR" || echo off))"
  : >>"$OUTLOG"
  # setsid + nohup: detached from the calling shell/make/CI process group; fd 9 (our lock) closed.
  nohup setsid mariadbd --defaults-file="$CNF" --user=root </dev/null >>"$OUTLOG" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$LAUNCH_PIDFILE"

  deadline=$((SECONDS + timeout_s))
  until ping_tcp; do
    if ! kill -0 "$pid" 2>/dev/null; then
      err "mariadbd exited during startup (log: $ERRLOG)"
      show_logs; exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      err "mariadbd did not answer on 127.0.0.1:$PORT within ${timeout_s}s (pid $pid still running; log: $ERRLOG)"
      show_logs; exit 1
    fi
    sleep 0.5
  done

  if [ ! -e "$INIT_MARK" ]; then
    say "first start: setting root password, creating user '$CDC_MYSQL_USER'"
    local sql
    sql="$(first_init_sql)"
    if ! printf '%s\n' "$sql" | timeout 60 mariadb --no-defaults --socket="$SOCK" -uroot >"$DIR/init-users.log" 2>&1 \
       && ! printf '%s\n' "$sql" | MYSQL_PWD="$CDC_MYSQL_ROOT_PASSWORD" timeout 60 mariadb --no-defaults --socket="$SOCK" -uroot >>"$DIR/init-users.log" 2>&1; then
      err "could not set up users on first start (log: $DIR/init-users.log)"
      show_logs "$DIR/init-users.log"; exit 1
    fi
    touch "$INIT_MARK"
  fi
  if ! echo "SELECT 1" | root_sql_tcp >/dev/null 2>"$DIR/last-client.err"; then
    err "mariadbd answers on 127.0.0.1:$PORT but root login with CDC_MYSQL_ROOT_PASSWORD fails: $(cat "$DIR/last-client.err")"
    err "(the instance was initialised with another password? remove $DIR to re-create it)"
    exit 1
  fi
  if [ -n "$REPLICA_OF" ] && [ ! -e "$REPLICA_MARK" ]; then setup_replica; fi
  if [ -n "$REPLICA_OF" ]; then wait_replica_threads; fi
  say "up on 127.0.0.1:$PORT (pid $(server_pid || echo "$pid"), log $ERRLOG)"
}

primary_sql() { # run SQL from stdin as root on the primary (127.0.0.1:$REPLICA_OF)
  MYSQL_PWD="$CDC_MYSQL_ROOT_PASSWORD" timeout 60 mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$REPLICA_OF" \
    -uroot --connect-timeout=5 --batch --skip-column-names "$@"
}

setup_replica() { # first start of a --replica-of instance: copy the primary, replicate with GTIDs
  local dbs dump gtid start seq u log="$DIR/replica-setup.log"
  [ "$LOG_BIN" = 1 ] || { err "--replica-of needs the binary log (drop --no-log-bin)"; exit 2; }
  u="$CDC_MYSQL_USER"
  echo "SELECT 1" | primary_sql >/dev/null 2>"$log" \
    || { err "the primary 127.0.0.1:$REPLICA_OF does not answer as root: $(cat "$log")"; exit 1; }
  seq="$(echo "SHOW MASTER STATUS" | primary_sql | awk '{print $1}' | sed 's/.*\.0*//')"
  [[ "$seq" =~ ^[0-9]+$ ]] || { err "the primary 127.0.0.1:$REPLICA_OF has no binary log (SHOW MASTER STATUS is empty)"; exit 1; }
  start="${ARG_BINLOG_START:-$((seq + 1000))}"
  say "replica of 127.0.0.1:$REPLICA_OF: copying its databases (mariadb-dump --gtid), binlog numbering from $start"
  dbs="$(echo "SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT IN ('mysql','information_schema','performance_schema','sys')" | primary_sql)"
  dump="$DIR/replica-seed.sql"
  if [ -n "$dbs" ]; then
    # shellcheck disable=SC2086 # $dbs: one word per database name
    MYSQL_PWD="$CDC_MYSQL_ROOT_PASSWORD" timeout 600 mariadb-dump --no-defaults --protocol=TCP -h127.0.0.1 -P"$REPLICA_OF" \
      -uroot --single-transaction --gtid --master-data=2 --triggers --databases $dbs \
      >"$dump" 2>>"$log" || { err "mariadb-dump of the primary failed (log: $log)"; show_logs "$log"; exit 1; }
    gtid="$(sed -n "s/^-- SET GLOBAL gtid_slave_pos='\\([^']*\\)';.*/\\1/p" "$dump" | head -n1)"
  else
    : >"$dump"
    gtid="$(echo "SELECT @@GLOBAL.gtid_binlog_pos" | primary_sql)"
  fi
  { echo "SET SESSION sql_log_bin=0;"; cat "$dump"; } | root_sql_tcp >>"$log" 2>&1 \
    || { err "loading the primary's dump failed (log: $log)"; show_logs "$log"; exit 1; }
  root_sql_tcp >>"$log" 2>&1 <<SQL || { err "configuring replication failed (log: $log)"; show_logs "$log"; exit 1; }
STOP SLAVE;
RESET MASTER TO $start;
SET GLOBAL gtid_slave_pos = '$gtid';
CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$REPLICA_OF, MASTER_USER='$u',
  MASTER_PASSWORD=$(sql_str "$CDC_MYSQL_PASSWORD"), MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
SET GLOBAL read_only = ON;
START SLAVE;
SQL
  rm -f "$dump"
  touch "$REPLICA_MARK"
  say "replicating from 127.0.0.1:$REPLICA_OF from GTID position '${gtid}' (gtid_domain_id=$DOMAIN_ID, server_id=$SERVER_ID)"
}

do_promote() { # the replica becomes a primary (a failover)
  ping_tcp || { err "not running on 127.0.0.1:${PORT:-?}"; exit 1; }
  root_sql_tcp <<SQL || { err "promotion failed"; exit 1; }
STOP SLAVE;
RESET SLAVE ALL;
SET GLOBAL read_only = OFF;
SQL
  [ ! -f "$SETTINGS" ] || sed -i 's/^REPLICA_OF=.*/REPLICA_OF=/' "$SETTINGS"
  say "promoted: no longer a replica, read_only=OFF (gtid_binlog_pos $(echo 'SELECT @@gtid_binlog_pos' | root_sql_tcp))"
}

do_stop() {
  local pid timeout_s deadline
  timeout_s="${CDC_MARIADB_STOP_TIMEOUT:-60}"
  if ! pid="$(server_pid)"; then
    rm -f "$LAUNCH_PIDFILE"
    say "not running"
    return 0
  fi
  say "stopping (pid $pid)"
  MYSQL_PWD="$CDC_MYSQL_ROOT_PASSWORD" timeout "$timeout_s" mariadb-admin --no-defaults --socket="$SOCK" \
      -uroot --connect-timeout=5 shutdown >/dev/null 2>&1 \
    || timeout "$timeout_s" mariadb-admin --no-defaults --socket="$SOCK" -uroot --connect-timeout=5 shutdown >/dev/null 2>&1 \
    || true
  deadline=$((SECONDS + timeout_s))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    say "mariadb-admin shutdown did not stop it; sending SIGTERM"
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.5; done
  fi
  if kill -0 "$pid" 2>/dev/null; then
    say "still running after SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.5; done
  fi
  if kill -0 "$pid" 2>/dev/null; then
    err "could not stop mariadbd pid $pid (log: $ERRLOG)"
    show_logs; exit 1
  fi
  rm -f "$LAUNCH_PIDFILE" "$PIDFILE"
  say "stopped"
}

mkdir -p "$CDC_INFRA_DIR"
case "$CMD" in
  status) do_status ;;
  promote) do_promote ;;
  start|stop|restart)
    exec 9>"$CDC_INFRA_DIR/.mariadb-$NAME.lock"
    flock -w 300 9 || { err "timed out waiting for the lock $CDC_INFRA_DIR/.mariadb-$NAME.lock (another start/stop running?)"; exit 1; }
    case "$CMD" in
      start) do_start ;;
      stop) do_stop ;;
      restart) do_stop; do_start ;;
    esac ;;
  *) usage ;;
esac
