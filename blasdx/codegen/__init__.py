"""From plans to CUDA text: the element-wise hooks, names, and the Jinja renderer."""
