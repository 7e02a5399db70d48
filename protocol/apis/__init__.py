"""odradek.protocol.apis"""
