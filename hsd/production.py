"""placeholder"""
def add_production_parser(sub):
    pass
