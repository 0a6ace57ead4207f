"""The seam every other part meets at: the store protocol and the checkpoint, the
document a store keeps, the rules of state, the errors, etags and lease facts, and the
bytes-written meter. It imports no other part. Nothing here is public API: import from
``durable_steps``.
"""
