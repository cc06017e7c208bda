"""The Delta edge: MERGE, DDL operations, type mapping, the warehouse, dead letters, the Spark
session and exploration. Importing this package starts no JVM."""
