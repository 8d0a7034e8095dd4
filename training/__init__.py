"""The engine both phases run on.

Owns the step (step.py) and the loop around it (loop.py; its stops at a signal,
stopping.py, and its log, step_log.py), the run set-up shared by pre-training and
fine-tuning (runtime.py: strategy, precision, dropout seeds, the chief; settings.py:
the run's and the hardware's fields, free of TensorFlow), the optimizer and its schedule
(optimization.py) and the logs' curves (curves.py). It knows no task: it keeps its
checkpoints through runs/checkpoints.py, and of model/ uses only model/internals.py
(Keras' private optimizer calls, TensorFlow's coordination service); it must not
import data_prep/, pretrain/ or finetune/.
"""
