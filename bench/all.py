"""Run both benchmarks in one process (one Spark session), printing each one's table and ratios.

    python -m bench              # == python -m bench.all: 500,000 rows each
    python -m bench --quick      # 50,000 rows each: a sanity check in about a minute
    python -m bench --rows 200000 --repeat 2 --profile

Options are those of ``bench.streaming`` / ``bench.snapshot`` (``--only streaming|snapshot`` runs
one of them).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from . import _common as C
from . import snapshot, streaming


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    C.add_common_args(p)
    p.add_argument("--fresh-lake", action="store_true", help="streaming: also run (c0) into an empty lake")
    p.add_argument("--only", choices=("streaming", "snapshot"), default=None)
    C.add_cold_args(p, "the end-to-end variants")  # both run() read args.cold
    args = p.parse_args(argv)
    C.print_machine()
    t0 = time.perf_counter()
    summary = []
    try:
        if args.only in (None, "streaming"):
            r = streaming.run(args)
            a, b, c = (C.best(r[k]) for k in ("a", "b", "c"))
            summary.append(("streaming", a, b, c, 0.9))
        if args.only in (None, "snapshot"):
            r = snapshot.run(args)
            a, b, c = (C.best(r[k]) for k in ("a", "b", "c"))
            summary.append(("snapshot", a, b, c, 0.8))
    finally:
        C.stop_spark()
    print(f"\n== summary ({time.perf_counter() - t0:.0f}s)")
    print(
        f"{'benchmark':<10} {'rows':>9} {'(a) rows/s':>11} {'(b) rows/s':>11} {'(c) rows/s':>11} {'b/a':>5} {'c/a':>5}  target c/a"
    )
    for name, a, b, c, tgt in summary:
        ca = c.rate / a.rate
        print(
            f"{name:<10} {a.rows:>9,} {a.rate:>11,.0f} {b.rate:>11,.0f} {c.rate:>11,.0f} "
            f"{b.rate / a.rate:>5.2f} {ca:>5.2f}  >= {tgt:.2f} {'MET' if ca >= tgt else 'MISSED'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
