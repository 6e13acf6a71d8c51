"""``python -m parity.curves``: layer 2 on CPU, the curves of `parity.curves.cpu`."""

import logging
import sys

from parity.curves.cpu import main

logging.basicConfig(level=logging.INFO, format="%(message)s")
logging.getLogger("xpgym").setLevel(logging.WARNING)  # the trainer's per-step lines
sys.exit(main())
