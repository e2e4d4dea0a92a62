"""`make bench`: measured figures, printed and written as JSON (never asserted in tests)."""
