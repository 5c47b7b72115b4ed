"""The BI catalog: a DuckDB file BI tools open, with one view per store table."""
