"""``python -m parity.tokens``: layer 1, the check of `parity.tokens.check`."""

import logging
import sys

from parity.tokens.check import main

logging.basicConfig(level=logging.INFO, format="%(message)s")
sys.exit(main())
