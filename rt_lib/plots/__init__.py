"""Figures: every figure is a function ``plot_x(ax, ...)`` (``figures``); the interactive explorers
are built from them (``explorers``), and so are the explorers drawn in advance that work without
a kernel (``static_explorers``)."""
