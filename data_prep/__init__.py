"""Pre-training data: corpus reading, WordPiece tokenization, vocabulary, TFRecords."""
