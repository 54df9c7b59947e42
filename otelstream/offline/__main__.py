"""``python -m otelstream.offline FILE…``: the same as ``otelstream check``, without the other subcommands."""

import sys

from otelstream.offline.command import main

sys.exit(main())
