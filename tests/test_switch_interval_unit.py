"""hold_switch_interval: the GIL switch interval is lowered while sink threads run and given back
exactly once, when the last holder releases.

Runs in a fresh interpreter: a LakeWriter holds the interval until it is garbage-collected, and a
writer an earlier test keeps referenced (a cached handle, a failed run's traceback) would otherwise
be a holder this test cannot see."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys
    from dagster_mysql_cdc.sink.lake import hold_switch_interval

    sys.setswitchinterval(0.005)
    a = hold_switch_interval(0.0005)
    assert sys.getswitchinterval() == 0.0005, sys.getswitchinterval()
    b = hold_switch_interval(0.001)  # never raises it back while another holder wants less
    assert sys.getswitchinterval() == 0.0005, sys.getswitchinterval()
    a()
    a()  # releasing twice is harmless
    assert sys.getswitchinterval() != 0.005, sys.getswitchinterval()
    b()
    assert sys.getswitchinterval() == 0.005, sys.getswitchinterval()
    hold_switch_interval(0)()  # 0: nothing changes
    assert sys.getswitchinterval() == 0.005, sys.getswitchinterval()
    print("ok")
    """
)


def test_lowered_while_held_and_restored_by_the_last_holder():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
