"""The store: Delta tables on a folder or S3 prefix, their writer lock, roll-ups and compaction."""
