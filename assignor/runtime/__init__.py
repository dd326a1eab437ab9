"""What a live application runs: the versioned group protocol, signed plans and the Kafka binding."""
