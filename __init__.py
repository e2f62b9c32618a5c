"""cultura: build cultural-bias benchmarks and evaluate models on them."""
__version__ = "0.1.0"
