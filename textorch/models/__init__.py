"""Networks and their parts."""
