"""odradek.zk"""
