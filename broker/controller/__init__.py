"""odradek.broker.controller"""
