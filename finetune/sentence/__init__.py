"""Sentence and sentence-pair tasks (GLUE and users' own): classification and regression.

family.py declares the family (finetune/family.py), GLUE's tasks and users' (from
their JSON descriptions); data.py holds its types, reads GLUE's TSVs, users' TSV/CSV
files and TFDS, and encodes pairs as the original; model.py is the classifier on [CLS] and
the runner that trains and scores it, with GLUE's submission files; metrics.py holds the
GLUE metrics; serving.py is the serving signature and the exports' declaration;
deployed.py is the exported model's reader.
"""
