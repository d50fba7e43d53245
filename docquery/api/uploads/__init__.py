"""Uploads: the multipart reader, the spool and the worker queue behind POST /v1/documents."""
