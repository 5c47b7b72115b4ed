"""Parse workers: a pool of crash-isolated processes that parse stats files and write fact segments."""
