"""Fine-tuning: task definitions and readers, metrics, heads and the fine-tuning loop."""
