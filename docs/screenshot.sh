#!/usr/bin/env bash
# Redo docs/asset-graph.png (the global asset graph of definitions.py in the Dagster UI) and, with
# --stream, docs/asset-customers.png (the customers table's page after a stream run).
#
#   bash docs/screenshot.sh [--materialize] [--stream] [--out docs/asset-graph.png] [--window 1200,1500] [--direction horizontal|vertical] [--timeout 90]
#
# Starts dagster-webserver on a free loopback port with a throw-away DAGSTER_HOME (onboarding dialog
# off), waits until the code location is loaded, opens the global asset lineage (/asset-groups, all
# groups expanded) in headless Chromium driven over the DevTools protocol, zooms the graph out until
# it fits, saves the PNG, and stops everything it started.
# --materialize first materializes every asset of definitions.py (snapshot with Spark, checks, the
# downstream asset) into a throw-away lake, so the nodes show "Materialized" and passed checks.
# --stream instead drives the binlog sensor in process (initial snapshot, then a window in which one
# customer row is changed and changed back), so the graph shows the checks evaluated after a stream
# run, and also captures the customers asset page (--asset-out, default docs/asset-customers.png).
# Needs `make infra` + the inventory sample (bash infra/load_dataset.sh inventory) and Chromium
# (apt-get install -y chromium). Paths are relative to the repository root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. infra/env.sh

OUT=docs/asset-graph.png
TIMEOUT_S=90
WINDOW=1200,1500
DIRECTION=horizontal
MATERIALIZE=0
STREAM=0
ASSET_OUT=docs/asset-customers.png
ASSET_PATH='/assets/dbserver1/inventory/customers'
# Global asset lineage with the three groups expanded (group ids are global@global:<group>).
PATH_IN_UI='/asset-groups?expanded=global%40global%3Ainventory%2Cglobal%40global%3Adbserver1_cdc%2Cglobal%40global%3Aanalytics'
while [ $# -gt 0 ]; do
  case "$1" in
    --materialize) MATERIALIZE=1; shift ;;
    --stream) STREAM=1; shift ;;
    --asset-out) ASSET_OUT="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --timeout) TIMEOUT_S="$2"; shift 2 ;;
    --window) WINDOW="$2"; shift 2 ;;
    --direction) DIRECTION="$2"; shift 2 ;;
    --path) PATH_IN_UI="$2"; shift 2 ;;
    *) sed -n '2,18p' "$0" >&2; exit 2 ;;
  esac
done

CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
[ -n "$CHROMIUM" ] || { echo "[screenshot] chromium not found: apt-get install -y chromium" >&2; exit 1; }

WORK="$(mktemp -d /tmp/cdc-screenshot-XXXXXX)"
export DAGSTER_HOME="$WORK/dagster_home"
mkdir -p "$DAGSTER_HOME"
printf 'nux:\n  enabled: false\n' >"$DAGSTER_HOME/dagster.yaml"   # no "Join the community" dialog
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ "$MATERIALIZE" = 1 ]; then
  echo "[screenshot] materializing every asset into a throw-away lake ($WORK/lake)"
  CDC_LAKE_URI="$WORK/lake" dagster asset materialize -f definitions.py --select '*' >"$WORK/materialize.log" 2>&1 \
    || { grep -E "Error|Exception|error:" "$WORK/materialize.log" | tail -20 >&2; exit 1; }
fi

if [ "$STREAM" = 1 ]; then
  echo "[screenshot] snapshot + one stream window through the binlog sensor into $WORK/lake"
  CDC_LAKE_URI="$WORK/lake" python3 - >"$WORK/stream.log" 2>&1 <<'PY' || { tail -30 "$WORK/stream.log" >&2; exit 1; }
import runpy
import dagster as dg
from dagster_mysql_cdc import run_sensor_ticks
ns = runpy.run_path("definitions.py")
defs, cdc, mysql = ns["defs"], ns["inventory_cdc"], ns["mysql"]
sensor = defs.get_sensor_def("dbserver1_cdc_binlog_sensor")
resources = {"mysql": mysql, "lake": defs.resources["lake"]}
with dg.DagsterInstance.get() as instance:
    log = run_sensor_ticks(sensor, cdc, resources, instance, run_log_level="WARNING")
    import pymysql, os
    conn = pymysql.connect(host=os.environ.get("CDC_MYSQL_HOST", "127.0.0.1"), port=int(os.environ.get("CDC_MYSQL_PORT", "3307")),
                           user="root", password=os.environ.get("CDC_MYSQL_ROOT_PASSWORD", "root-secret"), autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT email FROM inventory.customers WHERE id = 1001")
        (email,) = cur.fetchone()
        cur.execute("UPDATE inventory.customers SET email = 'changed@example.com' WHERE id = 1001")
        cur.execute("UPDATE inventory.customers SET email = %s WHERE id = 1001", (email,))
    conn.close()
    log = run_sensor_ticks(sensor, cdc, resources, instance, cursor=log.cursor, run_log_level="WARNING")
    print("stream runs:", [r.run_id for r in log.runs], log.skip_reasons)
PY
fi

echo "[screenshot] dagster-webserver on 127.0.0.1:$PORT (DAGSTER_HOME=$DAGSTER_HOME)"
CDC_LAKE_URI="$WORK/lake" dagster-webserver -f definitions.py -h 127.0.0.1 -p "$PORT" >"$WORK/webserver.log" 2>&1 &
SERVER_PID=$!

# Ready = the code location is LOADED (GraphQL), not just the HTTP port open.
QUERY='{"query":"{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"}'
for _ in $(seq 1 180); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then tail -40 "$WORK/webserver.log" >&2; exit 1; fi
  status="$(curl -s -m 5 -H 'Content-Type: application/json' -d "$QUERY" "http://127.0.0.1:$PORT/graphql" || true)"
  case "$status" in *'"loadStatus":"LOADED"'*) break ;; esac
  sleep 1
done
case "$status" in *'"loadStatus":"LOADED"'*) ;; *) echo "[screenshot] code location not loaded: $status" >&2; tail -40 "$WORK/webserver.log" >&2; exit 1 ;; esac

shoot() {  # shoot <graph|page> <path in the UI> <out.png> <width,height>
echo "[screenshot] http://127.0.0.1:$PORT$2 -> $3"
# Chromium is driven over the DevTools protocol (python `websockets`, a dagster-webserver
# dependency): open the page, wait until every asset of the graph is rendered, hide the side
# panels, zoom out until the graph fits and centre it, then capture. A plain
# `chromium --screenshot --virtual-time-budget=...` shows the graph at 100 % zoom, cut off.
rm -rf "$WORK/chromium"
python3 - "$CHROMIUM" "http://127.0.0.1:$PORT$2" "$3" "$4" "$WORK/chromium" "$TIMEOUT_S" "$DIRECTION" "$1" <<'PY'
import base64, json, os, subprocess, sys, time, urllib.request
from websockets.sync.client import connect

chromium, url, out, window, profile, timeout_s, direction, kind = sys.argv[1:]
width, height = (int(v) for v in window.split(","))
deadline = time.monotonic() + float(timeout_s)
browser = subprocess.Popen(
    [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
     "--disable-background-networking", "--disable-component-update", "--disable-sync",
     f"--user-data-dir={profile}", f"--window-size={width},{height}", "--hide-scrollbars",
     "--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank"],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
try:
    port_file = os.path.join(profile, "DevToolsActivePort")
    while not os.path.exists(port_file) or not open(port_file).read().strip():
        if time.monotonic() > deadline or browser.poll() is not None:
            sys.exit("[screenshot] chromium did not start its DevTools endpoint")
        time.sleep(0.2)
    port = int(open(port_file).read().split()[0])
    pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
    ws = connect(next(t for t in pages if t["type"] == "page")["webSocketDebuggerUrl"], max_size=None, legacy=True)
    ids = iter(range(1, 1 << 30))

    def call(method, **params):
        i = next(ids)
        ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def js(expr):
        return call("Runtime.evaluate", expression=expr, returnByValue=True).get("result", {}).get("value")

    call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
    call("Page.enable")
    call("Page.navigate", url=url)
    # graph direction: vertical (top-to-bottom) or horizontal; the UI keeps it in localStorage
    while js("document.readyState") != "complete":
        time.sleep(0.2)
    js(f"localStorage.setItem('asset-graph-direction', JSON.stringify('{direction}'))")
    call("Page.reload")
    if kind == "page":  # an asset page: wait until its metadata and checks are rendered, capture
        ready = "document.body.innerText.includes('lag_seconds') && document.body.innerText.includes('checksum_matches_source')"
        while not js(ready):
            if time.monotonic() > deadline:
                print("[screenshot] the asset page's metadata did not show up in time; capturing as is")
                break
            time.sleep(0.5)
        time.sleep(3)
        shot = call("Page.captureScreenshot", format="png")
        with open(out, "wb") as fh:
            fh.write(base64.b64decode(shot["data"]))
        print(f"[screenshot] asset page captured")
        sys.exit(0)
    # wait until the asset count in the graph is stable and non-zero
    count_nodes = "document.querySelectorAll('foreignObject').length"
    last, stable = -1, 0
    while stable < 6:
        if time.monotonic() > deadline:
            sys.exit("[screenshot] the asset graph did not render in time")
        n = js(count_nodes) or 0
        stable = stable + 1 if n == last and n > 0 else 0
        last = n
        time.sleep(0.5)
    # more room for the graph: hide the navigation and the asset tree beside the graph
    js("""(() => {
      const byText = [...document.querySelectorAll('button, a, div[role=button]')]
        .find(e => e.textContent.trim() === 'Hide navigation');
      if (byText) byText.click();
      const jump = [...document.querySelectorAll('input')].find(i => (i.placeholder || '').startsWith('Jump to'));
      let box = jump, toggle = null;
      while (box && !toggle) { box = box.parentElement; toggle = box && box.querySelector('button'); }
      if (toggle) toggle.click();
    })()""")
    time.sleep(2)
    # zoom out (ctrl + wheel, as a trackpad pinch) until the whole graph fits the canvas, then
    # drag it to the centre: the UI's own zoom-to-fit keeps large graphs at 100 %
    geometry = """(() => {
      const area = s => s.getBoundingClientRect().width * s.getBoundingClientRect().height;
      const svg = [...document.querySelectorAll('svg')].sort((a, b) => area(b) - area(a))[0];
      const c = svg.parentElement.getBoundingClientRect();
      const bar = [...document.querySelectorAll('input')].find(i => (i.placeholder || '').startsWith('Search and filter'));
      const top = Math.max(c.top, bar ? bar.getBoundingClientRect().bottom + 8 : 0);
      const boxes = [...svg.querySelectorAll('foreignObject')].map(f => f.getBoundingClientRect());
      const b = {left: Math.min(...boxes.map(r => r.left)), top: Math.min(...boxes.map(r => r.top)),
                 right: Math.max(...boxes.map(r => r.right)), bottom: Math.max(...boxes.map(r => r.bottom))};
      return {canvas: [c.left, top, innerWidth - 70, innerHeight],
              graph: [b.left, b.top, b.right, b.bottom]};
    })()"""
    margin = 40
    for _ in range(60):
        g = js(geometry)
        (cl, ct, cr, cb), (gl, gt, gr, gb) = g["canvas"], g["graph"]
        if gr - gl <= cr - cl - 2 * margin and gb - gt <= cb - ct - 2 * margin:
            break
        call("Input.dispatchMouseEvent", type="mouseWheel", x=(cl + cr) / 2, y=(ct + cb) / 2,
             deltaX=0, deltaY=40, modifiers=2)
        time.sleep(0.3)
    time.sleep(1)
    g = js(geometry)
    (cl, ct, cr, cb), (gl, gt, gr, gb) = g["canvas"], g["graph"]
    dx, dy = (cl + cr) / 2 - (gl + gr) / 2, (ct + cb) / 2 - (gt + gb) / 2
    # grab an empty point of the canvas and drag the graph by (dx, dy)
    start = js("""(() => {
      const area = s => s.getBoundingClientRect().width * s.getBoundingClientRect().height;
      const svg = [...document.querySelectorAll('svg')].sort((a, b) => area(b) - area(a))[0];
      const c = svg.parentElement.getBoundingClientRect();
      for (let y = c.top + 30; y < Math.min(c.bottom, innerHeight) - 30; y += 10)
        for (let x = c.left + 30; x < Math.min(c.right, innerWidth) - 120; x += 10) {
          const el = document.elementFromPoint(x, y);
          if (el && svg.parentElement.contains(el) && !el.closest('foreignObject') && !el.closest('button')) return [x, y];
        }
      return null;
    })()""")
    point = None
    if start and (abs(dx) > 2 or abs(dy) > 2):
        x0, y0 = start
        call("Input.dispatchMouseEvent", type="mousePressed", x=x0, y=y0, button="left", clickCount=1)
        for i in range(1, 11):
            call("Input.dispatchMouseEvent", type="mouseMoved", x=x0 + dx * i / 10, y=y0 + dy * i / 10, button="left")
        call("Input.dispatchMouseEvent", type="mouseReleased", x=x0 + dx, y=y0 + dy, button="left", clickCount=1)
        point = (round(dx), round(dy))
    time.sleep(2)
    shot = call("Page.captureScreenshot", format="png")
    with open(out, "wb") as fh:
        fh.write(base64.b64decode(shot["data"]))
    print(f"[screenshot] {last} graph elements; graph {js(geometry)['graph']} in canvas {g['canvas']} after a drag by {point}")
finally:
    browser.terminate()
    browser.wait(10)
PY
[ -s "$3" ] || { echo "[screenshot] no screenshot written" >&2; exit 1; }
echo "[screenshot] wrote $3"
}

shoot graph "$PATH_IN_UI" "$OUT" "$WINDOW"
if [ "$STREAM" = 1 ]; then
  shoot page "$ASSET_PATH" "$ASSET_OUT" "1400,1300"
fi
