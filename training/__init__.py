"""The engine both phases run on: the step, the loop around it, their set-up, the
optimizer and the curves (docs/architecture.md). It knows no task: it must not import
data_prep/, pretrain/ or finetune/."""
