"""odradek.broker.log"""
