"""``python -m bench``: both benchmarks (see :mod:`bench.all`)."""

import sys

from .all import main

sys.exit(main())
