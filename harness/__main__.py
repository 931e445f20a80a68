"""``python -m harness``: the command line (:mod:`harness.cli`)."""

import sys

from harness.cli import main

sys.exit(main())
