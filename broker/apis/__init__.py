"""odradek.broker.apis"""
