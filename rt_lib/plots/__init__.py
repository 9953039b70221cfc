"""Figures: every figure is a function ``plot_x(ax, ...)`` (``figures``); the interactive explorers
are built from them (``explorers``)."""
