"""`python -m lab runs|show`: see lab/cli.py."""

import sys

from .cli import main

sys.exit(main())
