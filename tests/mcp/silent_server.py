"""An MCP server that never answers: it writes its pid to ``argv[1]``, then sleeps,
ignoring its stdin (so closing the pipe does not stop it). For the startup_timeout
and process-cleanup tests."""

import os
import sys
import time

with open(sys.argv[1], "w") as fh:
    fh.write(str(os.getpid()))
time.sleep(120)
