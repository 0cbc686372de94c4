#!/usr/bin/env bash
# Installs what is missing and starts the local services (MariaDB "main" on $CDC_MYSQL_PORT,
# SeaweedFS S3 on $CDC_S3_ENDPOINT, the Spark Connect server on $CDC_SPARK_CONNECT_PORT unless
# CDC_SPARK_CONNECT=0), then checks their health. Idempotent; fast when all is up.
set -euo pipefail
HERE="$(dirname "${BASH_SOURCE[0]}")"
. "$HERE/env.sh"

bash "$HERE/install.sh"
# the Spark Connect server's JVM takes ~20 s to start: it boots while the others start
bash "$HERE/spark_connect.sh" start &
spark_connect=$!
bash "$HERE/mariadb.sh" start --instance main
bash "$HERE/seaweedfs.sh" start
wait "$spark_connect"
bash "$HERE/health.sh"
