"""The size stage: the GPU-memory calculator, instance choice and suggestions."""
