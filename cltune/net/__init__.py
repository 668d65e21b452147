"""Whole networks: their conv layers (bundled tables or an ONNX file), the tasks they make, one tuning
budget shared by the tasks, and the network's figure."""
