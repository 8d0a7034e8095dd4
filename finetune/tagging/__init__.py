"""Sequence tagging (CoNLL-2000 chunking as the original's finetune/tagging; named
entities, parts of speech and users' task files).

family.py declares the family (finetune/family.py) and reads users' task files; data.py
holds the tasks, reads CoNLL, CoNLL-U and JSON-lines files (or TFDS), converts tags
(IOB1/IOB2/BIOES <-> the BIOES labels), makes a sentence's windows and reads tags back
(numpy); model.py is the head that labels each word's first piece and the runner that
trains and scores it; metrics.py counts entities as conlleval does, and word accuracy;
serving.py is the serving signature and the exports' declaration; deployed.py is the
exported model's reader.
"""
