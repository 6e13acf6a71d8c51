"""``python -m parity.e2e``: the end-to-end runs of `parity.e2e.runs`."""

import logging
import sys

from parity.e2e.runs import main

logging.basicConfig(level=logging.INFO, format="%(message)s")
sys.exit(main())
