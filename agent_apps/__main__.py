"""``python -m agent_apps`` is the ``agent-apps`` command."""

import sys

from .cli import main

sys.exit(main())
