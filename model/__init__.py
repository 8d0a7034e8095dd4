"""The ELECTRA model: sizes, Keras encoder, heads, and the original checkpoint format."""
