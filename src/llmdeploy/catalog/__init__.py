"""Catalogs packaged as data: EC2 GPU instance types and GPUs, model architectures."""
