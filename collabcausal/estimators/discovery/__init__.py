"""estimators/discovery"""
