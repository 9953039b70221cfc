"""What a trained model computes, read from its weights and activations: principal components,
circles, attention and hidden states (``activations``), and Fourier spectra of embeddings and
neurons (``fourier``)."""
