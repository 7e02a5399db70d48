"""Replication: partitions and their replicas, the replica manager (append, read, ISR, high
watermark), the purgatories for acks=all produce and long-poll fetch, and the replica fetchers.

Invariant: only this room changes a partition's leader/follower role, its ISR or its high
watermark; the log below it never knows about other replicas.
"""
