"""Triton Inference Server + TensorRT-LLM."""
