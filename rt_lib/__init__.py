"""rt-companion: models, tasks, training and analysis for two papers on small transformers."""

__version__ = "0.1.0"
