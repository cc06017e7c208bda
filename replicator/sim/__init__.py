"""The TiCDC workload simulator, its checker, the `make run` demo and the local Kafka broker."""
