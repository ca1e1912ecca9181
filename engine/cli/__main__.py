"""`python -m ttc.engine.cli`: the `ttc` command without the console script on PATH."""

import sys

from ttc.engine.cli import console

sys.exit(console())
