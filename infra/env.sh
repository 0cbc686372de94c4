# shellcheck shell=bash
# Defaults for the local dagster-mysql-cdc infrastructure. Sourced by every infra script, the Makefile
# and .ci/run:  . infra/env.sh
# Every variable is only set when it is not already set, so any of them can be overridden from the
# environment (e.g. CDC_MYSQL_PORT=3317 make test).
# Do not `set -e`/`set -u` here: this file is also sourced into interactive shells.

# CDC_ROOT: this checkout. In bash it is always where this file lives: a shell that sourced
# another checkout's env.sh carries that checkout's paths, which must not apply here (make in this
# clone would otherwise start, stop or test the other clone's services).
if [ -n "${BASH_SOURCE[0]:-}" ]; then
  _cdc_here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
  if [ -n "${CDC_ROOT:-}" ] && [ "$CDC_ROOT" != "$_cdc_here" ]; then
    case "${CDC_UV:-}" in "$CDC_ROOT"/*) unset CDC_UV ;; esac
    case "${CDC_DATASETS_DIR:-}" in "$CDC_ROOT"/*) unset CDC_DATASETS_DIR ;; esac
    unset CDC_INFRA_DIR CDC_PYTHON
  fi
  CDC_ROOT="$_cdc_here"
  unset _cdc_here
elif [ -z "${CDC_ROOT:-}" ]; then
  CDC_ROOT="$(cd "$(dirname "$0")/.." && pwd -P)"
fi
export CDC_ROOT
export CDC_INFRA_DIR="${CDC_INFRA_DIR:-$CDC_ROOT/.infra}"

# The project environment (uv.lock -> .venv, made by infra/install.sh). CDC_UV: the uv binary (the
# one on PATH, else the one infra/install.sh bootstraps under .infra/tools).
export CDC_UV_VERSION="${CDC_UV_VERSION:-0.13.9}"
if [ -z "${CDC_UV:-}" ]; then
  CDC_UV="$(command -v uv 2>/dev/null || echo "$CDC_INFRA_DIR/tools/bin/uv")"
fi
export CDC_UV
export CDC_PYTHON="${CDC_PYTHON:-$CDC_ROOT/.venv/bin/python}"

# MariaDB (the "main" instance started by infra/mariadb.sh)
export CDC_MYSQL_HOST="${CDC_MYSQL_HOST:-127.0.0.1}"
export CDC_MYSQL_PORT="${CDC_MYSQL_PORT:-3307}"
export CDC_MYSQL_USER="${CDC_MYSQL_USER:-cdc}"
export CDC_MYSQL_PASSWORD="${CDC_MYSQL_PASSWORD:-cdc-secret}"
export CDC_MYSQL_ROOT_PASSWORD="${CDC_MYSQL_ROOT_PASSWORD:-root-secret}"

# Object storage (SeaweedFS S3 gateway started by infra/seaweedfs.sh)
export CDC_S3_ENDPOINT="${CDC_S3_ENDPOINT:-http://127.0.0.1:8333}"
export CDC_S3_BUCKET="${CDC_S3_BUCKET:-lake}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-cdc}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-cdc-secret}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export CDC_WEED_MASTER_PORT="${CDC_WEED_MASTER_PORT:-9333}"
export CDC_WEED_VOLUME_PORT="${CDC_WEED_VOLUME_PORT:-8080}"
export CDC_WEED_FILER_PORT="${CDC_WEED_FILER_PORT:-8888}"

# Sample databases (inventory/, sakila/)
export CDC_DATASETS_DIR="${CDC_DATASETS_DIR:-$CDC_ROOT/infra/datasets}"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"  # Spark binds loopback (no "hostname resolves to a loopback address" WARN)

# Spark Connect server started by infra/spark_connect.sh (make infra): window runs use it through
# CdcLakeResource.spark_remote = $CDC_SPARK_REMOTE instead of starting their own Spark.
# CDC_SPARK_CONNECT=0 skips the server; CDC_SPARK_REMOTE= (empty) makes runs use local Spark.
export CDC_SPARK_CONNECT="${CDC_SPARK_CONNECT:-1}"
export CDC_SPARK_CONNECT_PORT="${CDC_SPARK_CONNECT_PORT:-15002}"
if [ -z "${CDC_SPARK_REMOTE+x}" ]; then
  if [ "$CDC_SPARK_CONNECT" = "0" ]; then CDC_SPARK_REMOTE=""; else CDC_SPARK_REMOTE="sc://127.0.0.1:$CDC_SPARK_CONNECT_PORT"; fi
fi
export CDC_SPARK_REMOTE
