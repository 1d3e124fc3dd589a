"""Benchmarking: identical inputs, numerics checks, steady-state timing statistics."""
