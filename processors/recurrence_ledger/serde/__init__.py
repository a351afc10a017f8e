"""serde"""
