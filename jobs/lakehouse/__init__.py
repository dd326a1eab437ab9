"""The lakehouse: the Spark session, Delta tables declared by schemas/tables, and the Lake facade."""
