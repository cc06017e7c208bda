"""`python -m bench` (what `make bench` runs)."""

import sys

from bench import main

sys.exit(main())
