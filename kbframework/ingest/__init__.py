"""The ingestion pipeline: normalize → hash → chunk → embed → replace chunks (one transaction)."""
