"""The ELECTRA model: sizes, the Keras encoder and heads, the generator/discriminator
pair, the original and Hugging Face checkpoint formats, FLOPs counting. Knows no data
and no training: imports only training/ and util/ (neither pretrain/ nor finetune/, nor
data_prep/)."""
