"""odradek.broker"""
