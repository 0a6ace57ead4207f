"""Ownership after a crash: ``recover`` resumes the runs whose worker died, and the worker
loop does it until told to stop. Imports the runner and the seam. Nothing here is public
API: import from ``durable_steps``.
"""
