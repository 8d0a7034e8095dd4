"""The ELECTRA model: sizes, the Keras encoder and heads, the generator/discriminator
pair, the weight formats (weights/: one module per format), FLOPs counting. Knows no
data and no training: imports only util/ (neither training/, pretrain/, finetune/ nor
data_prep/)."""
