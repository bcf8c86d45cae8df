"""``python -m envpin.probe.selftest``: the self-test (or, with --child, the battery child)."""

import sys

from envpin.probe.selftest.run import main

sys.exit(main())
