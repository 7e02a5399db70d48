"""Who a connection is and what it may do: TLS listeners, SASL authentication, principals,
and (``authorizer.py``) ACLs.

Invariant: a connection's principal is fixed by its listener's security protocol before any
request other than ApiVersions and the SASL handshake is served; nothing in this package
writes cryptography of its own (TLS is pyOpenSSL through Twisted, SCRAM is hashlib/hmac).
"""
