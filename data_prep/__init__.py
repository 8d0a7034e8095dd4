"""Pre-training data: corpus reading, WordPiece tokenization, vocabularies, example
packing, masking, and the TFRecord contract and writer. Knows no model: imports only
util/ (never training/, model/, pretrain/ or finetune/)."""
