"""simulations"""
