"""odradek.protocol"""
