"""The engine both phases run on.

Owns the training loop (loop.py), the run set-up shared by pre-training and fine-tuning
(runtime.py: strategy, precision, dropout seeds, the run lock; settings.py: the settings
dataclass, free of TensorFlow), the optimizer and its schedule (optimization.py), the
resume check (resume.py) and the logs and curves (curves.py). It knows no task: of
model/ it uses only a run dir's checkpoint files (model/weights/run_files.py), the
dropout generators (model/dropout.py) and Keras' private optimizer calls
(model/internals.py); it must not import data_prep/, pretrain/ or finetune/.
"""
