"""A run directory: what each phase keeps in its model dir, and its reading and writing.

lock.py: one live run per model dir; record.py: the run's record (its signature, config
and settings' history; the check a resumed run passes; older records read in today's
names; the record rebuilt from the copy its checkpoints carry); checkpoints.py: the
training checkpoints (model, optimizer, step, data position, dropout generators and the
record's copy), which read whole, and their saving without leftovers; pretrained.py: a
pre-training run dir read as a weight format; start.py: a run's start from pre-trained
weights, named in its record. Above model/ (the network and the weight formats) and
util/, below training/.
"""
