"""`python -m bertviz_lite ...` runs the command line (cli.py), as the `bertviz-lite` script does."""

import sys

from .cli import main

sys.exit(main())
