"""The read side: fetch methods over the store (``Profiles``), read-only SQL, the convenience views."""
