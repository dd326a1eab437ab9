"""The product on one machine: embedded Apache Kafka, local Airflow, fleets of live groups (for demo, tests, bench)."""
