"""``python -m webhook …``: the same as ``fleetgate webhook …``."""

import sys

from webhook.cli import main

sys.exit(main())
