"""One module per trainer, each exposing ``SPEC`` (`parity.core.TrainerSpec`)."""
