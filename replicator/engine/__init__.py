"""The engine: decode -> resolved-ts windows -> apply, and the progress that makes it exactly once."""
