"""Extractive question answering (SQuAD 1.1/2.0, MRQA), as the original's finetune/qa;
its modules: docs/architecture.md's finetune/<family> row."""
