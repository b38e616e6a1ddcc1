"""verl's ``verl.utils.debug`` path: ``metrics.calculate_debug_metrics`` (the sampler/trainer probability mismatch)."""
