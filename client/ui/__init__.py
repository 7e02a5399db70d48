"""``odradek ui``: a live, read-only web view of a cluster.

Invariant: nothing here writes to ZooKeeper or sends a request that changes a broker; the
collector (``collector.py``) does the blocking reads, the sans-IO ``snapshot.py`` turns them into
the JSON the page (``static/``) renders, ``metrics.py`` parses the brokers' Prometheus text and
keeps the throughput series, and ``server.py`` is the thin Twisted Web shell.
"""
