"""Fine-tuning: what all task families share (config, task registry, the TaskRunner
interface, the model with layer-wise learning rates, the trainer, predictions, serving);
each family lives in its subfolder (sentence/, qa/, tagging/) and declares itself in its
family.py, which finetune/tasks.py lists. Never imports pretrain/."""
