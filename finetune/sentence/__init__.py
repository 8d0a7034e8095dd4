"""Sentence and sentence-pair tasks (GLUE and users' own): classification and regression;
its modules: docs/architecture.md's finetune/<family> row."""
