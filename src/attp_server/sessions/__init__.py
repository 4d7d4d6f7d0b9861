"""What outlives one call: sessions, the state their programs keep, isolation scopes, remembered approvals.

Owns: who is calling and what the server keeps for them between calls (in the store).
May import: `store`, the foundations and `sandbox`. Must never be imported by: `model`, the foundations or `sandbox`.
"""
