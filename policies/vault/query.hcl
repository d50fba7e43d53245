# DocQuery query service (Vault role docquery-query). Least privilege:
# read its own KV secrets; nothing else.
# Threat: a compromised query pod must not read other workloads' secrets or
# touch sys/. No Transit grant: the bundle runs without encryption at rest and
# the app container has no Vault token (query-encryption.hcl is the opt-in).

# Its own secrets: llm-api-key, qdrant-read-only-key, api-keys, jwks.
# KV v2 needs the data/ prefix; no list on metadata (names are not enumerable).
path "secret/data/docquery/query/*" {
  capabilities = ["read"]
}

# Keep its own token alive (VaultSession renews before expiry). Listed here so
# roles can set token_no_default_policy=true and this file is the whole grant.
path "auth/token/renew-self" {
  capabilities = ["update"]
}

path "auth/token/lookup-self" {
  capabilities = ["read"]
}
