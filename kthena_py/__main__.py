"""Allow ``python -m kthena_py``."""

import sys

from kthena_py.main import main

sys.exit(main())
