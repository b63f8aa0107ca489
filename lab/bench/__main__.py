"""`python -m lab.bench` (the command line is `lab/bench/cli.py`)."""

import sys

from .cli import main

sys.exit(main())
