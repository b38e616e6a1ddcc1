"""verl's fully-async trainer, run by ``trainer.v1.trainer_mode=separate_async`` (docs/async.md)."""
