"""One module per notebook: its parameters (validated) and the work it runs."""
