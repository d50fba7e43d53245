"""Retrieval, prompting, citations and output sanitising. Imports ports and domain only."""
