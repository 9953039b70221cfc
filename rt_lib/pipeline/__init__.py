"""The pipeline: everything between ``./run_all.sh`` and a notebook's cells.

Planning, scheduling and reporting runs (:mod:`.runner`, :mod:`.plan`, :mod:`.schedule`,
:mod:`.progress`, :mod:`.report`), the record of what is up to date (:mod:`.manifest`), where
training runs execute (:mod:`.executor`), the experiments' registry and results folders
(:mod:`.registry`), the companion site (:mod:`.site`) and kept evidence (:mod:`.evidence`).

The core (model, tasks, training, analysis, plots: the rest of :mod:`rt_lib`) imports nothing
from here (tests/test_layers.py); an experiment module meets the pipeline through its one
``EXPERIMENT = Experiment(...)`` line and the job runner of its training runs.
"""
