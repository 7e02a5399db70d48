"""The broker's network layer: the socket server that frames and dispatches client requests,
the request handler that decodes them for the API handlers, and the client other brokers use.

Invariant: nothing here knows what an API does; bytes in, one handler call, bytes out.
"""
