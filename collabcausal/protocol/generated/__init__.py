"""Stubs generated from collabcausal.proto by collabcausal.protocol.codegen; do not edit."""
