"""Exports of a fine-tuned model, one writer module per form (registry.py lists them):
the original checkpoint format, Hugging Face transformers, the serving SavedModel,
LiteRT and ONNX. What each task family's exported model takes and returns, and which
module of the family's turns texts into its inputs and its outputs into --predict's
records, is declared in the family's serving.py (finetune/serving.py Serving); the
reader shipped beside the files is reader.py.

Its floor: above finetune/ and pretrain/ (its writers read fine-tuned models and the
weight formats of model/weights/), below tools/ (the commands that parse the flags).
The steps that write the SavedModel at the end of a fine-tuning run and the original
checkpoint at the end of pre-training stay in those loops, which cannot import upward;
the writers here call the same functions.
"""
