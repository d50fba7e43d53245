"""Settings: the one pydantic-settings model, the DOCQUERY_* variable check, and the rendered reference."""
