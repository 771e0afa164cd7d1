"""placeholder"""
def register(blueprint):
    pass
