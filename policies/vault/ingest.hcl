# DocQuery ingest Job (Vault role docquery-ingest). Least privilege:
# read its own KV secrets; nothing else (Transit: ingest-encryption.hcl, opt-in).
# Threat: a compromised ingest pod must not decrypt stored chunks or read
# the query service's secrets.

# Its own secrets: qdrant-api-key (read-write), embedder-api-key.
path "secret/data/docquery/ingest/*" {
  capabilities = ["read"]
}

path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
