"""RL math over `Episode` records: token layouts (`layouts`) and advantages (`advantages`).

Imports the records of `xpgym.core` only (numpy at module level; torch nowhere), so every
adapter, the reference trainer and the parity suite compute the same numbers from one place.
"""
