"""The runtime under everything else: where results go and how they are written (``io``: atomic
writes, checksums, the project's folders), the settings a process runs with (``context``: profile,
results root; ``seeding``: every seed and thread count, set in one place), how a notebook's
parameters are typed and checked (``params``), what the numeric platform is (``fingerprint``)
and which files a run produced (``manifest``).  It imports nothing else of rt_lib."""
