"""Where training runs execute and where their unfinished work waits: the job runner the
experiments hand their runs to (:mod:`.executor`: inline, local or Slurm) and the mid-run
checkpoint folders of an interrupted run (:mod:`.resume`).  Below the pipeline: it imports nothing
from :mod:`rt_lib.pipeline` (tests/test_layers.py)."""
