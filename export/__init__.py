"""Exports of a fine-tuned model, one writer module per form (registry.py); what each
family's exported model takes and returns is its serving.py's (finetune/serving.py)."""
