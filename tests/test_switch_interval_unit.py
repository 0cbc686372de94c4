"""hold_switch_interval: the GIL switch interval is lowered while sink threads run and given back
exactly once, when the last holder releases."""

from __future__ import annotations

import gc
import sys

from dagster_mysql_cdc.sink.lake import hold_switch_interval


def test_lowered_while_held_and_restored_by_the_last_holder():
    # writers of earlier tests kept alive only by reference cycles (a failed run's traceback)
    # release their hold when collected: collect them, so this test's holders are the only ones
    gc.collect()
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        a = hold_switch_interval(0.0005)
        assert sys.getswitchinterval() == 0.0005
        b = hold_switch_interval(0.001)  # never raises it back while another holder wants less
        assert sys.getswitchinterval() == 0.0005
        a()
        a()  # releasing twice is harmless
        assert sys.getswitchinterval() != 0.005
        b()
        assert sys.getswitchinterval() == 0.005
        hold_switch_interval(0)()  # 0: nothing changes
        assert sys.getswitchinterval() == 0.005
    finally:
        sys.setswitchinterval(before)
