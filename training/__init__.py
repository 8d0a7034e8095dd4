"""The engine both phases run on.

Owns the training loop (loop.py), the run set-up shared by pre-training and fine-tuning
(runtime.py: strategy, precision, dropout seeds, the run lock; settings.py: the settings
dataclass, free of TensorFlow), the optimizer and its schedule (optimization.py), the
resume check (resume.py) and the logs and curves (curves.py). It knows no model and no
task: it must not import model/, data_prep/, pretrain/ or finetune/, only util/.
"""
