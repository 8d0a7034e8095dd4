"""Sequence tagging (CoNLL-2000 chunking as the original's finetune/tagging; named
entities, parts of speech and users' task files); its modules: docs/architecture.md's
finetune/<family> row."""
