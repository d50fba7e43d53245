"""Settings: the one pydantic-settings model and the DOCQUERY_* variable check."""
