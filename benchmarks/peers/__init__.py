"""textorch against its peers, DeLFT 1.2.0 and Wapiti: the side-by-side suite, its data, scorer, table and runners."""
