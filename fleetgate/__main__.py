"""``python -m fleetgate …``: the same as ``fleetgate …``."""

import sys

from fleetgate.cli import main

sys.exit(main())
