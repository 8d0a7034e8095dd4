"""Sequence tagging (CoNLL-2000 chunking), as the original's finetune/tagging.

family.py declares the family (finetune/family.py); data.py reads CoNLL files, converts
tags (BIO <-> BIOES), encodes sentences and reads tags back (numpy); model.py is the
head that labels each word's first piece and the runner that trains and scores it;
metrics.py counts chunk F1 as conlleval; serving.py is the serving signature and the
exports' declaration; deployed.py is the exported model's reader.
"""
