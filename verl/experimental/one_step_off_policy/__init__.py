"""verl's one-step-off-policy trainer, run by ``trainer.v1.trainer_mode=colocate_async`` (docs/async.md)."""
