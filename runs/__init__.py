"""A run directory: what each phase keeps in its model dir, and its reading and writing.

model_files.py: the name of every file a model dir holds, and every write into it;
lock.py: one live run per model dir; record.py: the run's record (its signature, config
and settings' history; the check a resumed run passes; the record rebuilt from the copy
its checkpoints carry); checkpoints.py: the training checkpoints (model, optimizer,
step, data position, dropout generators and the record's copy), which read whole, their
saving without leftovers, and the one restore of trained weights; pretrained.py: a
pre-training run dir read as a weight format; start.py: a run's start from pre-trained
weights, named in its record. Above model/ (the network and the weight formats) and
util/, below training/.
"""
