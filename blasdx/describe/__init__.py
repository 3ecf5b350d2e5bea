"""Describing a block GEMM: precisions, operators, their traits and rules, and the Descriptor."""
