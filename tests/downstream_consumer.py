"""One run of the incremental order totals asset (assets/downstream.py) in a process of its own,
so tests/test_change_feed.py can SIGKILL it mid-run as a crashed run worker dies.

``python tests/downstream_consumer.py '<json>'``: ``server``, ``database``, ``lake`` (base URI),
``instance_dir`` (a file-based Dagster instance shared by the runs), ``output`` (lake path parts
of the totals), ``by_day``, ``kill_after_writes`` (SIGKILL this process right after its n-th
Delta write: a crash between the asset's writes and its recorded materialization); exit 0 when
the run succeeded.
"""

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(spec: dict) -> int:
    import signal

    import dagster as dg

    import assets.downstream as example
    from assets.downstream import build_order_totals

    kill_after = spec.get("kill_after_writes")
    if kill_after:
        real, written = example.write_deltalake, []

        def write_then_die(*args, **kwargs):
            real(*args, **kwargs)
            written.append(1)
            if len(written) >= kill_after:
                os.kill(os.getpid(), signal.SIGKILL)

        example.write_deltalake = write_then_die
    from dagster_mysql_cdc import CdcLakeResource

    asset = build_order_totals(
        spec["server"],
        spec["database"],
        key="order_totals",
        output=tuple(spec["output"]),
        by_day_output=tuple(spec["by_day"]),
    )
    os.environ["DAGSTER_HOME"] = spec["instance_dir"]
    instance = dg.DagsterInstance.get()
    lake = CdcLakeResource(base_uri=spec["lake"], spark_remote=None)
    result = dg.materialize([asset], resources={"lake": lake}, instance=instance, raise_on_error=False)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
