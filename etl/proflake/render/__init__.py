"""Output: one result table rendered as text, CSV, JSON or Parquet."""
