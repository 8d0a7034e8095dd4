"""Sequence tagging (CoNLL-2000 chunking), as the original's finetune/tagging.

family.py declares the family (finetune/family.py); data.py reads CoNLL files and
converts tags (BIO <-> BIOES); features.py encodes sentences and reads tags back
(numpy); head.py labels each word's first piece; runner.py trains and scores;
metrics.py counts chunk F1 as conlleval; serving.py is the serving signature;
deployed.py is the exported model's reader.
"""
