"""The pipeline: the command line between ``./run_all.sh`` and a notebook's cells.

Planning, scheduling and reporting runs (:mod:`.runner`, :mod:`.plan`, :mod:`.schedule`,
:mod:`.progress`, :mod:`.report`, :mod:`.kernel`), the record of what is up to date
(:mod:`.manifest`), the experiments' registry (:mod:`.registry`), the companion site
(:mod:`.site`) and kept evidence (:mod:`.evidence`).

Nothing below imports it (tests/test_layers.py): the core (model, tasks, training, analysis,
plots), the declaration of an experiment (:mod:`rt_lib.experiment`), the job runner of training
runs (:mod:`rt_lib.jobs`) and the experiments themselves, which meet the pipeline through their
one ``EXPERIMENT = Experiment(...)`` line.
"""
