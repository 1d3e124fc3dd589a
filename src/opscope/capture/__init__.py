"""Capture: profiling sessions over torch.profiler, device backends, compile metrics, run folders.

Imports torch lazily; importing this package does not import torch.
"""
