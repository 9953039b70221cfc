"""``python -m rt_lib.pipeline`` = ``./run_all.sh`` without the set-up."""

import sys

from rt_lib.pipeline.runner import main

sys.exit(main())
