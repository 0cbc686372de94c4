#!/usr/bin/env bash
# Installs what is missing and starts the local services (MariaDB "main" on $CDC_MYSQL_PORT,
# SeaweedFS S3 on $CDC_S3_ENDPOINT), then checks their health. Idempotent; fast when all is up.
set -euo pipefail
HERE="$(dirname "${BASH_SOURCE[0]}")"
. "$HERE/env.sh"

bash "$HERE/install.sh"
bash "$HERE/mariadb.sh" start --instance main
bash "$HERE/seaweedfs.sh" start
bash "$HERE/health.sh"
