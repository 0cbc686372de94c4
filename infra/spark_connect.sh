#!/usr/bin/env bash
# A long-lived Spark Connect server for the lake resource (CdcLakeResource.spark_remote), so a
# window run connects to a warm JVM with warm Python workers instead of starting Spark itself.
#
#   infra/spark_connect.sh start|stop|status
#
# Uses the installed pyspark (the locked .venv): its wheel ships bin/spark-submit and
# jars/spark-connect_2.13-<version>.jar (the server class), so nothing is downloaded. Listens on
# 127.0.0.1:$CDC_SPARK_CONNECT_PORT (default 15002), master $CDC_SPARK_CONNECT_MASTER (default
# local[2]); its Python workers run the .venv's Python (they import dagster_mysql_cdc to write the
# lake's files). State (pid, log) under $CDC_INFRA_DIR/spark-connect. CDC_SPARK_CONNECT=0: start
# does nothing (runs then start their own local Spark). CDC_SPARK_CONNECT_CONF adds spark-submit
# options (e.g. "--conf spark.executor.memory=4g"). Runs share one server-side session (stable
# session id, see dagster_mysql_cdc/sink/spark_session.py); idle sessions close after 12 h. Idempotent.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

cmd="${1:-start}"
DIR="$CDC_INFRA_DIR/spark-connect"
PORT="$CDC_SPARK_CONNECT_PORT"
MASTER="${CDC_SPARK_CONNECT_MASTER:-local[2]}"

spark_home() {
  "$CDC_PYTHON" - <<'PY'
import os, pyspark
print(os.path.dirname(pyspark.__file__))
PY
}

listening() {
  "$CDC_PYTHON" - "$PORT" <<'PY' >/dev/null 2>&1
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
PY
}

spark_env() {
  export SPARK_HOME
  SPARK_HOME="$(spark_home)"
  export SPARK_CONF_DIR="$DIR/conf"
  export PYSPARK_PYTHON="$CDC_PYTHON" PYSPARK_DRIVER_PYTHON="$CDC_PYTHON"
  export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
}

PIDFILE="$DIR/server.pid"
pid_of() {
  [ -f "$PIDFILE" ] && cat "$PIDFILE" 2>/dev/null || true
}

case "$cmd" in
  start)
    if [ "${CDC_SPARK_CONNECT:-1}" = "0" ]; then
      echo "[spark-connect] skipped (CDC_SPARK_CONNECT=0)"
      exit 0
    fi
    if listening; then
      echo "[spark-connect] up on sc://127.0.0.1:$PORT"
      exit 0
    fi
    mkdir -p "$DIR/conf"
    # Spark's own log goes to the log file only (WARN and up; no progress bars on any console).
    cat >"$DIR/conf/log4j2.properties" <<'EOF'
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.connect.name = org.apache.spark.sql.connect
logger.connect.level = warn
EOF
    spark_env
    echo "[spark-connect] starting Spark Connect $("$CDC_PYTHON" -c 'import pyspark; print(pyspark.__version__)') on sc://127.0.0.1:$PORT (master $MASTER, log $DIR/server.log)"
    # spark-submit runs the server class shipped in jars/spark-connect_*.jar (SparkSubmit needs no
    # application jar for it); exec chain bash -> java, so $! is the JVM
    nohup "$SPARK_HOME/bin/spark-submit" \
      --class org.apache.spark.sql.connect.service.SparkConnectServer \
      --name "Spark Connect server (dagster-mysql-cdc)" \
      --master "$MASTER" \
      --driver-memory "${CDC_SPARK_CONNECT_DRIVER_MEMORY:-2g}" \
      --conf "spark.connect.grpc.binding.port=$PORT" \
      --conf "spark.connect.grpc.binding.address=127.0.0.1" \
      --conf "spark.ui.enabled=false" \
      --conf "spark.ui.showConsoleProgress=false" \
      --conf "spark.sql.session.timeZone=UTC" \
      --conf "spark.sql.shuffle.partitions=4" \
      --conf "spark.sql.execution.arrow.pyspark.enabled=true" \
      --conf "spark.python.worker.reuse=true" \
      --conf "spark.pyspark.python=$CDC_PYTHON" \
      --conf "spark.connect.grpc.maxInboundMessageSize=268435456" \
      --conf "spark.connect.session.manager.defaultSessionTimeout=12h" \
      ${CDC_SPARK_CONNECT_CONF:-} \
      >"$DIR/server.log" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    for _ in $(seq 1 120); do
      if listening; then
        echo "[spark-connect] up on sc://127.0.0.1:$PORT (pid $(pid_of))"
        exit 0
      fi
      pid="$(pid_of)"
      if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
        break
      fi
      sleep 1
    done
    echo "[spark-connect] ERROR: no server on 127.0.0.1:$PORT; log:" >&2
    tail -n 30 "$DIR/server.log" >&2 || true
    exit 1
    ;;
  stop)
    pid="$(pid_of)"
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "[spark-connect] not running"
      exit 0
    fi
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || { rm -f "$PIDFILE"; echo "[spark-connect] stopped"; exit 0; }
      sleep 1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
    echo "[spark-connect] stopped (killed)"
    ;;
  status)
    if listening; then echo "[spark-connect] up on sc://127.0.0.1:$PORT (pid $(pid_of))"; else echo "[spark-connect] down"; exit 1; fi
    ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
