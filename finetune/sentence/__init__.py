"""Sentence and sentence-pair tasks (GLUE and users' own): classification and regression.

family.py declares the family (finetune/family.py); task.py holds its types; glue.py the
GLUE table; files.py reads GLUE's TSVs and users' TSV/CSV files, tfds_reader.py TFDS,
and data.py picks between them; user_task.py reads a user's task description;
submission.py writes GLUE submission files; features.py encodes pairs as the original;
deployed.py is the exported model's reader; head.py is the classifier on [CLS]; runner.py trains and scores them; metrics.py holds
the GLUE metrics; serving.py is the serving signature.
"""
