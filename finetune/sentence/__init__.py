"""Sentence and sentence-pair tasks (GLUE and users' own): classification and regression.

family.py declares the family (finetune/family.py) and GLUE's tasks; data.py holds its
types, reads GLUE's TSVs, users' TSV/CSV files and TFDS, reads a user's task
description and encodes pairs as the original; model.py is the classifier on [CLS] and
the runner that trains and scores it, with GLUE's submission files; metrics.py holds the
GLUE metrics; serving.py is the serving signature and the exports' declaration;
deployed.py is the exported model's reader.
"""
