"""Write profiles the way smdebug does: capture, a sample job, and the demo."""
