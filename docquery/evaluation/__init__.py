"""Retrieval evaluation on BEIR-layout datasets (``docquery eval retrieval``).

``beir`` loads a dataset, ``metrics`` scores a run, ``runner`` chunks the corpus
with the product's chunker (``docquery.chunking``) and settings, ingests it into a
throwaway embedded collection and runs the queries through the same ``search`` the
service uses.
"""
