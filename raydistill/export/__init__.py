"""A trained student out of its run: ONNX export, INT8 quantisation and its re-scoring, the model card."""
