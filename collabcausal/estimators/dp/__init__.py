"""estimators/dp"""
