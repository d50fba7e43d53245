"""The real-documents evaluation: a public HTML manual fetched from Debian, everyday questions, what comes back."""
