"""odradek.client"""
