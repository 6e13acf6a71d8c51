"""``python -m parity.update``: see `parity.update`."""

import logging
import sys

from parity.update import main

logging.basicConfig(level=logging.INFO, format="%(message)s")
sys.exit(main())
