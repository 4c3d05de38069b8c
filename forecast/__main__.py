"""`python -m forecast ...`, the same as the `forecast` command."""

import sys

from .cli import main

sys.exit(main())
