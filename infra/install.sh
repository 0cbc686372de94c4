#!/usr/bin/env bash
# Installs what the local infrastructure needs. Idempotent, never prompts.
#   - MariaDB server + client (apt) if `mariadbd` or `mariadb` is missing
#   - make (apt) if missing; python3 (apt) if missing
#   - checks java >= 17 (installs openjdk-17-jre-headless via apt only if java is absent)
#   - uv (PyPI) if missing, then `uv sync --frozen --compile-bytecode`: the project venv
#     $CDC_ROOT/.venv exactly as uv.lock pins it (the package editable + the dev group), with the
#     bytecode of every module compiled (the package's too). Skip with CDC_SKIP_PIP=1.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

say() { echo "[install] $*"; }
die() { echo "[install] ERROR: $*" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install these packages by hand: $*"
  [ "$(id -u)" = 0 ] || die "need root to apt-get install $* (run as root or install them by hand)"
  if [ "$APT_UPDATED" = 0 ]; then
    say "apt-get update"
    apt-get update -q </dev/null || die "apt-get update failed"
    APT_UPDATED=1
  fi
  say "apt-get install -y $*"
  apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" </dev/null \
    || die "apt-get install $* failed"
}

need=()
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then need+=(mariadb-server); fi
if ! command -v mariadb >/dev/null 2>&1; then need+=(mariadb-client); fi
if [ "${#need[@]}" -gt 0 ]; then need=(mariadb-server mariadb-client); fi
command -v make >/dev/null 2>&1 || need+=(make)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-venv)
if [ "${#need[@]}" -gt 0 ]; then apt_install "${need[@]}"; fi

# mariadbd lives in /usr/sbin, which is not on every root PATH (e.g. some containers)
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
  die "mariadbd still not found after installing mariadb-server"
fi
command -v mariadb-install-db >/dev/null 2>&1 || die "mariadb-install-db not found (package mariadb-server)"

# Java: Spark 4 needs Java 17+. It is preinstalled on the team machines; only install if absent.
if ! command -v java >/dev/null 2>&1; then
  say "java not found; installing openjdk-17-jre-headless (Spark 4 needs Java 17+)"
  apt_install openjdk-17-jre-headless
  command -v java >/dev/null 2>&1 || die "java not found on PATH after installing openjdk-17-jre-headless; install Java 17+ and put it on PATH"
fi
java_ver="$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\)[."].*/\1/p' | head -n1)"
if [ -z "$java_ver" ]; then
  die "could not determine the Java version from \`java -version\` ($(command -v java)); Spark 4 needs Java 17+"
elif [ "$java_ver" -lt 17 ]; then
  die "java $java_ver found at $(command -v java), but Spark 4 needs Java 17+ (e.g. apt-get install openjdk-17-jre-headless)"
fi

# The project environment: uv (PyPI) creates $CDC_ROOT/.venv from uv.lock, exactly as locked.
# uv itself comes from PyPI into a bootstrap venv under .infra/ when it is not on PATH already.
if [ "${CDC_SKIP_PIP:-0}" = 1 ]; then
  say "CDC_SKIP_PIP=1: skipping uv sync"
else
  if ! [ -x "$CDC_UV" ]; then
    boot="$CDC_INFRA_DIR/tools"
    say "uv not found: installing uv==$CDC_UV_VERSION from PyPI into $boot"
    if ! python3 -m venv "$boot" >/dev/null 2>&1; then
      apt_install python3-venv
      rm -rf "$boot"
      python3 -m venv "$boot" || die "python3 -m venv $boot failed"
    fi
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$boot/bin/python" -m pip install --no-input -q "uv==$CDC_UV_VERSION" </dev/null \
      || die "pip install uv==$CDC_UV_VERSION failed (see the pip output above)"
    [ -x "$CDC_UV" ] || die "uv is not at $CDC_UV after installing it"
  fi
  # the OS trust store (as pip, curl and git use), so a TLS-intercepting proxy's CA is trusted too
  export UV_NATIVE_TLS="${UV_NATIVE_TLS:-1}"
  say "uv sync --frozen --compile-bytecode (the locked environment in $CDC_ROOT/.venv; a few minutes on a fresh machine)"
  # --python python3: the interpreter on PATH (uv may not download one: only PyPI is reachable).
  # --compile-bytecode: every run the daemon launches is a fresh process, and so is every Spark
  # Python worker; without .pyc files (uv writes none by default, and nothing is written at
  # import time under PYTHONDONTWRITEBYTECODE=1 or in a read-only venv) each of them compiles
  # dagster, pyspark and pandas from source: `import dagster, pyspark.sql.connect.session` took
  # 3.0 s instead of 1.2 s (docs/benchmarks.md, "Bytecode of the environment").
  (cd "$CDC_ROOT" && UV_PYTHON_DOWNLOADS=never "$CDC_UV" sync --frozen --compile-bytecode --python "${CDC_UV_PYTHON:-python3}" -q </dev/null) \
    || die "uv sync --frozen failed (see above); uv.lock must match pyproject.toml: run 'uv lock' after changing dependencies"
  # the package itself is installed editable (its source is this checkout): compile it too
  "$CDC_ROOT/.venv/bin/python" -m compileall -q -j 0 "$CDC_ROOT/dagster_mysql_cdc" >/dev/null \
    || die "compiling the package's bytecode failed (a syntax error in dagster_mysql_cdc/?)"
fi
say "ok"
