"""Pre-training data: corpus reading, WordPiece tokenization, vocabularies, example
packing, masking, and the TFRecord contract and writer. Knows no model: imports only
training/ and util/ (never model/, pretrain/ or finetune/)."""
