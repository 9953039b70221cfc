"""Training: the loop (``train``), grokfast's gradient filter (``grokfast``), several seeds of one
model trained as one vmapped model (``batched``), and what a training step costs in memory and
time (``footprint``)."""
