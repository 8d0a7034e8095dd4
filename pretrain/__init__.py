"""Pre-training: input pipeline, masking, the ELECTRA objective and its training loop."""
