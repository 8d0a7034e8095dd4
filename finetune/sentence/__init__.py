"""Sentence and sentence-pair tasks (GLUE and users' own): classification and regression.

data.py reads the tasks' files (GLUE's TSVs, users' TSV/CSV tasks, TFDS) and writes GLUE
submission files; features.py encodes pairs as the original; head.py is the classifier
on [CLS]; runner.py trains and scores them; metrics.py holds the GLUE metrics.
"""
