"""Where records come from: a Kafka topic, capture archives, and capture (topic -> archive)."""
