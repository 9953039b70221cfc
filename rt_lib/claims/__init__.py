"""Claims of the papers and how a run records them: the ledger of every claim
(``ledger.yaml``, read and recorded by ``ledger``), the checks a notebook's numbers go through
(``verdicts``: holds, fails, not shown and why), and how claims are compared across numeric
platforms (``portable``)."""
