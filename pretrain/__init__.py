"""Pre-training: its config, input pipeline, the ELECTRA objective and its variants, eval
metrics and the run; and the discriminator as a replaced-token scorer. Never imports
finetune/."""
